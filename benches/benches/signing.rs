//! SigV4 signing cost per request (a GET with a Range header, as the loader sends them).

use aws_credential_types::Credentials;
use criterion::{Criterion, criterion_group, criterion_main};
use std::time::SystemTime;

fn signing(c: &mut Criterion) {
    let creds = Credentials::new(
        "AKIDEXAMPLE",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        None,
        None,
        "bench",
    );
    c.bench_function("sigv4-sign-get", |b| {
        b.iter(|| {
            let mut req =
                http::Request::get("http://127.0.0.1:9000/bucket/train/0/img_1_of_24.npz")
                    .header("host", "127.0.0.1:9000")
                    .header("range", "bytes=8388608-16777215")
                    .body(())
                    .unwrap();
            sluice_backend_hyper::sigv4::sign_request(
                &mut req,
                &creds,
                "us-east-1",
                SystemTime::now(),
            )
            .unwrap();
            req
        })
    });
}

criterion_group!(benches, signing);
criterion_main!(benches);
