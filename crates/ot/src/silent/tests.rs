//! Silent OT and VOLE between two parties: every output satisfies its
//! correlation.

use psikit_transport::{Channel, Limits};
use rand::rngs::OsRng;

use super::receiver::{CotOutput, VoleOutput};
use super::*;
use crate::{gf128, ExtConfig, OtError, SessionId};

/// What each party got from one extension.
enum Made {
    Cot(Zeroizing<Vec<u128>>, CotOutput),
    Vole(Zeroizing<Vec<u128>>, VoleOutput),
}

use zeroize::Zeroizing;

/// Runs one session with an extension per `(count, vole)`, returning `Δ`
/// and the outputs.
async fn session(runs: &[(usize, bool)]) -> (u128, Vec<Made>) {
    let (mut a, mut b) = Channel::memory_pair(Limits::default());
    let sid = SessionId::new(b"silent test");
    let owned = runs.to_vec();
    let sender = tokio::spawn(async move {
        let mut s = SilentSender::setup(&mut a, &sid, ExtConfig::default(), &mut OsRng).await?;
        let mut outs = Vec::new();
        for (count, vole) in owned {
            outs.push(match vole {
                true => s.vole(&mut a, count, &mut OsRng).await?,
                false => s.cot(&mut a, count, &mut OsRng).await?,
            });
        }
        Ok::<_, OtError>((s.delta(), outs))
    });
    let mut r = SilentReceiver::setup(&mut b, &sid, ExtConfig::default(), &mut OsRng)
        .await
        .expect("receiver setup");
    let mut received = Vec::new();
    for &(count, vole) in runs {
        received.push(match vole {
            true => Err(r.vole(&mut b, count, &mut OsRng).await.expect("vole")),
            false => Ok(r.cot(&mut b, count, &mut OsRng).await.expect("cot")),
        });
    }
    let (delta, sent) = sender.await.expect("sender task").expect("sender");
    let made = sent
        .into_iter()
        .zip(received)
        .map(|(s, r)| match r {
            Ok(cot) => Made::Cot(s, cot),
            Err(vole) => Made::Vole(s, vole),
        })
        .collect();
    (delta, made)
}

#[tokio::test]
async fn correlated_ots_and_voles_satisfy_their_relations() {
    let runs = [
        (1, false),
        (5000, true),
        (1 << 16, false),
        (1 << 16, true),
        (70_000, true),
        // Two parts (params::parts), concatenated.
        (params::MAX_PART + 1000, false),
        (params::MAX_PART + 7, true),
    ];
    let (delta, made) = session(&runs).await;
    for ((count, _), m) in runs.iter().zip(made) {
        match m {
            Made::Cot(q, r) => {
                assert_eq!(
                    (q.len(), r.t.len(), r.choices.len()),
                    (*count, *count, *count)
                );
                for i in 0..*count {
                    assert_eq!(r.t[i], q[i] ^ (r.choices.mask(i) & delta), "COT {i}");
                }
                if *count >= 5000 {
                    let ones = r.choices.count_ones();
                    assert!(
                        ones.abs_diff(count / 2) < count / 20,
                        "{ones} ones of {count}"
                    );
                }
            }
            Made::Vole(b, r) => {
                assert_eq!((b.len(), r.a.len(), r.c.len()), (*count, *count, *count));
                for i in 0..*count {
                    assert_eq!(r.a[i] ^ b[i], gf128::mul(r.c[i], delta), "VOLE {i}");
                }
                // c is pseudorandom: no zeros, no repeats in a sample.
                let mut sample: Vec<u128> = r.c[..1000].to_vec();
                sample.sort_unstable();
                sample.dedup();
                assert_eq!(sample.len(), 1000);
                assert!(!sample.contains(&0));
            }
        }
    }
}
