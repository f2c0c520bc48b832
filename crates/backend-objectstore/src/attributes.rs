//! Object attributes between sluice's terms and object_store's, for this backend and the
//! `object_store` adapter (sluice-object-store).

use object_store::Attribute;
use sluice_core::Attributes;

/// Our attributes in object_store's terms.
pub fn to_object_store(a: &Attributes) -> object_store::Attributes {
    let mut out = object_store::Attributes::new();
    let standard = [
        (Attribute::ContentType, &a.content_type),
        (Attribute::CacheControl, &a.cache_control),
        (Attribute::ContentDisposition, &a.content_disposition),
        (Attribute::ContentEncoding, &a.content_encoding),
        (Attribute::ContentLanguage, &a.content_language),
    ];
    for (k, v) in standard {
        if let Some(v) = v {
            out.insert(k, v.clone().into());
        }
    }
    for (k, v) in &a.metadata {
        out.insert(Attribute::Metadata(k.clone().into()), v.clone().into());
    }
    out
}

/// object_store's attributes in ours, and those that have no place in ours (the storage
/// class, attributes object_store adds later): a reader may ignore them, a writer must not.
pub fn from_object_store(a: &object_store::Attributes) -> (Attributes, Vec<&Attribute>) {
    let mut out = Attributes::default();
    let mut left = Vec::new();
    for (k, v) in a {
        let v = v.as_ref().to_owned();
        match k {
            Attribute::ContentType => out.content_type = Some(v),
            Attribute::CacheControl => out.cache_control = Some(v),
            Attribute::ContentDisposition => out.content_disposition = Some(v),
            Attribute::ContentEncoding => out.content_encoding = Some(v),
            Attribute::ContentLanguage => out.content_language = Some(v),
            Attribute::Metadata(name) => {
                out.metadata.insert(name.as_ref().to_owned(), v);
            }
            other => left.push(other),
        }
    }
    (out, left)
}
