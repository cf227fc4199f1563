//! A job's part of the fuzz targets (`crate::fuzzing`): the job
//! directory's files for `job_files` (each read by the reader a job uses;
//! what reads must write back and read again the same), and the seeds of
//! `job_files` and `job_messages`.

use std::path::Path;

use psikit_transport::Message;

use super::journal::JobDir;
use super::prepare::Bucket;
use super::spool::{item_key, Record, SpoolWriter};
use super::terms::Agreed;
use super::{capacity::Shape, journal::InputSummary, journal::OwnTerms};
use crate::balanced::Role;

/// Which file the fuzz input is (the selector's low two bits).
const AGREEMENT: u8 = 0;
const INPUT: u8 = 1;
const RESULT: u8 = 2;
const SPOOL: u8 = 3;

/// The capacity a fuzzed spool file is loaded at.
const CAPACITY: u64 = 64;

/// Reads `file` as the job file `which` picks, in a job directory at
/// `root`.
pub(crate) fn fuzz_file(root: &Path, which: u8, file: &[u8]) {
    let Ok(dir) = JobDir::open(root) else {
        return;
    };
    let written = match which % 4 {
        AGREEMENT => std::fs::write(root.join("job"), file),
        INPUT => std::fs::write(root.join("input"), file),
        RESULT => std::fs::write(root.join("results").join("00000"), file),
        _ => std::fs::write(dir.bucket_path(0), file),
    };
    if written.is_err() {
        return;
    }
    match which % 4 {
        AGREEMENT => {
            if let Ok(Some((agreed, terms, confirmed))) = dir.agreement() {
                dir.set_agreement(&agreed, &terms, confirmed)
                    .expect("an agreement writes");
                let again = dir.agreement().expect("reads").expect("is there");
                assert_eq!(again, (agreed, terms, confirmed), "agreement round trip");
            }
        }
        INPUT => {
            if let Ok(Some(summary)) = dir.input() {
                dir.set_input(&summary).expect("a summary writes");
                assert_eq!(dir.input().expect("reads"), Some(summary));
            }
        }
        RESULT => {
            if let Ok(rows) = dir.result(0) {
                dir.commit(0, &rows).expect("a result writes");
                assert_eq!(dir.result(0).expect("reads"), rows);
            }
        }
        _ => {
            if let Ok(bucket) = Bucket::load(&dir.bucket_path(0), 0, Role::Receiver, CAPACITY) {
                assert_eq!(bucket.keys.len() as u64, CAPACITY);
                assert!(bucket.values.iter().all(|v| v.len() as u64 == CAPACITY));
                let all = vec![true; bucket.keys.len()];
                let rows = bucket.matched_rows(&all);
                assert!(rows.windows(2).all(|w| w[0] <= w[1]), "rows sorted");
            }
        }
    }
}

/// Seeds: each kind of job file as a job writes it, behind its selector.
pub(crate) fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let root = tempfile::tempdir().expect("a temporary directory");
    let dir = JobDir::open(root.path()).expect("a job directory");
    let agreed = Agreed {
        job_id: [7; 16],
        shape: Shape {
            buckets: 4,
            sender_capacity: 300,
            receiver_capacity: 280,
        },
        peer_rows: 1000,
    };
    let terms = OwnTerms {
        role: Role::Sender,
        kind: super::kind::JobKind::Balanced {
            protocol: crate::balanced::Protocol::Vole,
            mode: crate::common::two_party::Mode {
                malicious: false,
                low_comm: false,
                reveal: true,
            },
        },
        key_format: "psikit-key-v1;columns=1;normalize=trim".into(),
    };
    dir.set_agreement(&agreed, &terms, true)
        .expect("an agreement");
    dir.set_input(&InputSummary {
        digest: [3; 32],
        rows_read: 1002,
        rows: 1000,
        longest_key: 30,
    })
    .expect("a summary");
    dir.commit(0, &[2, 3, 5, 8, 13]).expect("a result");
    let mut spool = SpoolWriter::create(&dir.bucket_path(0), 4096, 2, false).expect("a spool");
    for row in 1..=20u64 {
        let key = item_key(&(row % 7).to_le_bytes());
        spool
            .push(&Record { key, row }, &[row, u64::MAX - row], &[])
            .expect("a record");
    }
    spool.finish().expect("sealed");
    let read = |path: &Path| std::fs::read(path).expect("the file");
    let tagged = |which: u8, path: &Path| [&[which][..], &read(path)].concat();
    vec![
        ("agreement", tagged(AGREEMENT, &root.path().join("job"))),
        ("input", tagged(INPUT, &root.path().join("input"))),
        (
            "result",
            tagged(RESULT, &root.path().join("results").join("00000")),
        ),
        ("spool", tagged(SPOOL, &dir.bucket_path(0))),
    ]
}

/// Seeds of the `job_messages` target: each message of a job behind its
/// selector and bound bytes.
pub(crate) fn message_seeds() -> Vec<(&'static str, Vec<u8>)> {
    use crate::balanced::{Protocol, Role};
    use crate::jobs::kind::JobKind;
    use crate::jobs::terms::{self as job, BucketStart, Committed, JobDone, JobHello, Lane, Which};
    /// Selector, the two bound bytes (the job's bucket count), the payload.
    fn bounded<M: Message>(buckets: u16, message: &M) -> Vec<u8> {
        let which = crate::fuzzing::seeds::pick::<M>(job::KINDS);
        [
            &[which][..],
            &buckets.to_be_bytes(),
            &message.to_frame().payload,
        ]
        .concat()
    }
    let new = JobHello {
        role: Role::Sender,
        which: Which::New,
        nonce: [7; 16],
        kind: JobKind::Balanced {
            protocol: Protocol::Vole,
            mode: crate::common::two_party::Mode {
                malicious: true,
                low_comm: false,
                reveal: false,
            },
        },
        key_format: "psikit-key-v1;columns=1;normalize=trim,lower".into(),
        rows: 100_000_000,
        max_bucket_items: 1 << 22,
        lanes: 4,
    };
    let resume = JobHello {
        role: Role::Receiver,
        which: Which::Resume {
            job_id: [9; 16],
            confirmed: true,
        },
        kind: JobKind::Balanced {
            protocol: Protocol::Rr16,
            mode: crate::common::two_party::Mode {
                malicious: false,
                low_comm: false,
                reveal: true,
            },
        },
        rows: 0,
        ..new.clone()
    };
    let mut sums = crate::cpsi::CpsiConfig::new(crate::cpsi::App::Sum);
    sums.min_intersection = 1000;
    sums.product_bits = 32;
    let circuit = JobHello {
        kind: JobKind::Circuit {
            terms: sums.agreed(),
            value_columns: 2,
        },
        ..new.clone()
    };
    // Buckets 0-4, 9 and 12 of 13.
    let committed = Committed {
        bits: vec![0x1f, 0x12],
    };
    vec![
        ("hello-new", bounded(0, &new)),
        ("hello-resume", bounded(0, &resume)),
        ("hello-circuit", bounded(0, &circuit)),
        ("committed", bounded(13, &committed)),
        ("committed-past-the-end", bounded(12, &committed)),
        ("bucket-start", bounded(13, &BucketStart { bucket: 12 })),
        (
            "bucket-start-out-of-range",
            bounded(12, &BucketStart { bucket: 12 }),
        ),
        ("done", bounded(0, &JobDone)),
        (
            "lane",
            bounded(
                4,
                &Lane {
                    token: [5; 16],
                    lane: 3,
                },
            ),
        ),
        (
            "lane-out-of-range",
            bounded(
                3,
                &Lane {
                    token: [5; 16],
                    lane: 3,
                },
            ),
        ),
    ]
}
