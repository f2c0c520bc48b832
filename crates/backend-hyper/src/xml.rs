//! The S3 XML documents this backend reads and writes.

use serde::Deserialize;
use sluice_core::wire::UploadedPart;
use std::time::SystemTime;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ListBucketResult {
    #[serde(default)]
    pub contents: Vec<Contents>,
    #[serde(default)]
    pub common_prefixes: Vec<CommonPrefix>,
    #[serde(default)]
    pub is_truncated: bool,
    pub next_continuation_token: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Contents {
    pub key: String,
    pub size: u64,
    #[serde(rename = "ETag")]
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CommonPrefix {
    pub prefix: String,
}

/// ListMultipartUploads' answer.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ListMultipartUploadsResult {
    #[serde(default)]
    pub upload: Vec<UploadEntry>,
    #[serde(default)]
    pub is_truncated: bool,
    pub next_key_marker: Option<String>,
    pub next_upload_id_marker: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct UploadEntry {
    pub key: String,
    pub upload_id: String,
    pub initiated: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct InitiateMultipartUploadResult {
    pub upload_id: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CompleteMultipartUploadResult {
    #[serde(rename = "ETag")]
    pub etag: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CopyObjectResult {
    #[serde(rename = "ETag")]
    pub etag: Option<String>,
}

/// DeleteObjects' answer in quiet mode: only the keys not deleted.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DeleteResult {
    #[serde(default)]
    pub error: Vec<DeleteError>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DeleteError {
    pub key: String,
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub message: String,
}

/// Whether the document is an `<Error>` (S3 answers some calls 200 with one: CopyObject,
/// CompleteMultipartUpload), not a result that contains `<Error>` elements (DeleteObjects).
pub fn is_error_document(body: &str) -> bool {
    let mut rest = body.trim_start();
    if let Some(decl) = rest.strip_prefix("<?")
        && let Some(end) = decl.find("?>")
    {
        rest = decl[end + 2..].trim_start();
    }
    rest.starts_with("<Error>") || rest.starts_with("<Error ")
}

pub fn parse<'a, T: Deserialize<'a>>(body: &'a str) -> Result<T, quick_xml::DeError> {
    quick_xml::de::from_str(body)
}

/// `CompleteMultipartUpload`'s request body: each part's number, ETag and, when it was
/// sent with one, checksum.
pub fn complete_body(parts: &[UploadedPart]) -> String {
    let mut s = String::from("<CompleteMultipartUpload>");
    for p in parts {
        let crc = p.checksum.map_or_else(String::new, |c| {
            format!("<ChecksumCRC64NVME>{}</ChecksumCRC64NVME>", c.to_base64())
        });
        s.push_str(&format!(
            "<Part><PartNumber>{}</PartNumber><ETag>{}</ETag>{crc}</Part>",
            p.number,
            quick_xml::escape::escape(p.etag.as_str())
        ));
    }
    s.push_str("</CompleteMultipartUpload>");
    s
}

/// `DeleteObjects`' request body: quiet (only failures answered), keys escaped.
pub fn delete_body<'a>(keys: impl Iterator<Item = &'a str>) -> String {
    let mut s = String::from("<Delete><Quiet>true</Quiet>");
    for k in keys {
        s.push_str("<Object><Key>");
        // Also as character references: a parser turns a literal CR, LF or tab into other
        // whitespace, which would name another key.
        for c in quick_xml::escape::escape(k).chars() {
            match c {
                '\r' => s.push_str("&#13;"),
                '\n' => s.push_str("&#10;"),
                '\t' => s.push_str("&#9;"),
                c => s.push(c),
            }
        }
        s.push_str("</Key></Object>");
    }
    s.push_str("</Delete>");
    s
}

/// ISO 8601 timestamps as S3 listings give them (`2024-01-02T03:04:05.000Z`).
pub fn parse_iso8601(s: &str) -> Option<SystemTime> {
    // Days from the civil date: Howard Hinnant's days_from_civil.
    let b = s.as_bytes();
    if b.len() < 19 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    u64::try_from(secs)
        .ok()
        .map(|s| SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_listing_and_errors() {
        let doc = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><IsTruncated>true</IsTruncated>
<Contents><Key>a/1</Key><LastModified>2024-01-02T03:04:05.000Z</LastModified><ETag>"abc"</ETag><Size>12</Size></Contents>
<CommonPrefixes><Prefix>a/b/</Prefix></CommonPrefixes><NextContinuationToken>tok</NextContinuationToken></ListBucketResult>"#;
        let l: ListBucketResult = parse(doc).unwrap();
        assert!(l.is_truncated);
        assert_eq!(l.contents[0].key, "a/1");
        assert_eq!(l.contents[0].size, 12);
        assert_eq!(l.contents[0].etag.as_deref(), Some("\"abc\""));
        assert_eq!(l.common_prefixes[0].prefix, "a/b/");
        assert_eq!(l.next_continuation_token.as_deref(), Some("tok"));
        let t = parse_iso8601(l.contents[0].last_modified.as_deref().unwrap()).unwrap();
        assert_eq!(
            t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs(),
            1_704_164_645
        );
    }

    #[test]
    fn complete_body_escapes_etags_and_carries_checksums() {
        let part = |number, checksum| UploadedPart {
            number,
            etag: "\"a\"".into(),
            checksum,
            size: None,
        };
        assert_eq!(
            complete_body(&[part(1, None)]),
            "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>&quot;a&quot;</ETag></Part></CompleteMultipartUpload>"
        );
        let crc = sluice_core::checksum::Crc::of(b"123456789");
        assert!(complete_body(&[part(2, Some(crc))]).contains(&format!(
            "<ETag>&quot;a&quot;</ETag><ChecksumCRC64NVME>{}</ChecksumCRC64NVME></Part>",
            crc.to_base64()
        )));
    }

    #[test]
    fn delete_objects_bodies_and_answers() {
        assert_eq!(
            delete_body(["a<b", "c&d\r\n\t"].into_iter()),
            "<Delete><Quiet>true</Quiet><Object><Key>a&lt;b</Key></Object><Object><Key>c&amp;d&#13;&#10;&#9;</Key></Object></Delete>"
        );
        let answer = r#"<?xml version="1.0" encoding="UTF-8"?>
<DeleteResult><Error><Key>k1</Key><Code>AccessDenied</Code><Message>no</Message></Error></DeleteResult>"#;
        assert!(
            !is_error_document(answer),
            "errors inside a result are per key"
        );
        let r: DeleteResult = parse(answer).unwrap();
        assert_eq!((r.error.len(), r.error[0].key.as_str()), (1, "k1"));
        let none: DeleteResult = parse("<DeleteResult></DeleteResult>").unwrap();
        assert!(none.error.is_empty());
        assert!(is_error_document(
            "<?xml version=\"1.0\"?>\n<Error><Code>InternalError</Code></Error>"
        ));
        assert!(is_error_document("<Error><Code>SlowDown</Code></Error>"));
    }

    proptest::proptest! {
        /// Arbitrary bodies, and valid documents cut or spliced anywhere: parsed or refused,
        /// never a panic.
        #[test]
        fn listing_and_error_parsing_never_panics(
            junk in "\\PC{0,200}",
            cut in 0usize..400,
            size in "[-0-9a-z]{0,24}",
        ) {
            let doc = format!(
                "<ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>k</Key><Size>{size}</Size></Contents><NextContinuationToken>{junk}</NextContinuationToken></ListBucketResult>"
            );
            let cut = doc.char_indices().map(|(i, _)| i).find(|i| *i >= cut.min(doc.len())).unwrap_or(doc.len());
            for body in [junk.as_str(), &doc, &doc[..cut]] {
                let _ = parse::<ListBucketResult>(body);
                let _ = sluice_core::wire::ErrorDoc::parse(body.as_bytes());
                let _ = parse::<InitiateMultipartUploadResult>(body);
                let _ = parse::<CompleteMultipartUploadResult>(body);
            }
            let _ = parse_iso8601(&junk);
        }
    }
}
