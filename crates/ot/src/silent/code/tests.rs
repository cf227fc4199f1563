use super::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Words `0..count` of a code stream, computed in one go.
fn stream_words(seed: u128, count: usize) -> Vec<u32> {
    let blocks = Prg::new(seed).blocks(0, count.div_ceil(4));
    (0..count)
        .map(|w| (blocks[w / 4] >> (32 * (w % 4))) as u32)
        .collect()
}

/// The code as its definition, with plain loops and indices taken mod
/// the length everywhere, to check the fast loops and the streaming.
fn reference_encode(code: &ExConvCode, x: &[u128]) -> Vec<u128> {
    let k = code.k();
    let mut tail = x[k..].to_vec();
    let len = tail.len();
    for &seed in &SEEDS[..2] {
        let words = stream_words(seed, len);
        for i in 0..len {
            let xi = tail[i];
            for b in 0..ACC {
                if words[i] >> b & 1 == 1 {
                    tail[(i + 1 + b) % len] ^= xi;
                }
            }
            tail[(i + 1 + ACC) % len] ^= xi;
        }
    }
    let words = stream_words(SEEDS[2], WEIGHT * k);
    let region = len / WEIGHT;
    (0..k)
        .map(|j| {
            (0..WEIGHT).fold(x[j], |acc, r| {
                let offset = (u64::from(words[r * k + j]) * region as u64) >> 32;
                acc ^ tail[r * region + offset as usize]
            })
        })
        .collect()
}

#[test]
fn fast_encoding_equals_the_definition() {
    let mut rng = StdRng::seed_from_u64(1);
    for k in [WEIGHT, 40, 257, 1000, 5000] {
        let code = ExConvCode::new(k);
        let x: Vec<u128> = (0..code.n()).map(|_| rng.gen()).collect();
        let mut y = x.clone();
        code.dual_encode(&mut y);
        assert_eq!(y[..k], reference_encode(&code, &x)[..], "k = {k}");
    }
}

/// The kernels this CPU can run.
fn available_kernels() -> Vec<Kernel> {
    let cpu = psikit_primitives::cpu::features();
    let x86 = cfg!(target_arch = "x86_64");
    [
        (Kernel::Portable, true),
        (Kernel::Avx2, x86 && cpu.avx2),
        (Kernel::Avx512, x86 && cpu.avx512f),
    ]
    .into_iter()
    .filter_map(|(kernel, runs)| runs.then_some(kernel))
    .collect()
}

#[test]
fn every_kernel_convolutes_like_the_portable_one() {
    let mut rng = StdRng::seed_from_u64(3);
    // Shorter than the window, around the kernels' group and window
    // sizes, around refills of coefficients, and large.
    let lengths = [
        1, 2, 7, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 35, 36, 37, 100,
    ]
    .into_iter()
    .chain([STREAMED - 1, STREAMED, STREAMED + 26, STREAMED + 29])
    .chain([3 * STREAMED + 17, 1 << 16]);
    for len in lengths {
        let x: Vec<u128> = (0..len).map(|_| rng.gen()).collect();
        let mut want = x.clone();
        convolute(&mut want, SEEDS[0], Kernel::Portable);
        for kernel in available_kernels() {
            let mut got = x.clone();
            convolute(&mut got, SEEDS[0], kernel);
            assert!(got == want, "{kernel:?} differs at length {len}");
        }
    }
}

#[test]
fn every_kernel_convolutes_bytes_like_the_portable_one() {
    let mut rng = StdRng::seed_from_u64(4);
    for len in [1, 25, 26, 27, 28, 29, 100, STREAMED + 27, 3 * STREAMED + 17] {
        // Choice bits, and bytes with every bit in use.
        for top in [2, 4, 8, 16, 32, 256] {
            let x: Vec<u8> = (0..len).map(|_| rng.gen_range(0..top) as u8).collect();
            let mut want = x.clone();
            convolute(&mut want, SEEDS[1], Kernel::Portable);
            for kernel in available_kernels() {
                let mut got = x.clone();
                convolute(&mut got, SEEDS[1], kernel);
                assert!(got == want, "{kernel:?} differs at length {len}");
            }
        }
    }
}

#[test]
fn vector_kernels_take_the_steps_before_the_wrap_around() {
    let mut x = vec![1u128; 1000];
    let coeffs = [u128::MAX; 250];
    for kernel in available_kernels() {
        let taken = u128::convolute_steps(&mut x, 0, &coeffs, kernel, 0);
        match kernel {
            Kernel::Portable => assert_eq!(taken, 0),
            _ => assert!(
                (1000 - 36..=1000 - ACC - 1).contains(&taken),
                "{kernel:?}: {taken}"
            ),
        }
    }
}

thread_local! {
    /// Bit-plane runs of the byte kernel on this thread.
    pub(super) static PLANE_RUNS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

#[test]
fn the_byte_kernel_runs_the_same_planes_wherever_the_noise_lies() {
    // The receiver's noise positions are secret: a kernel that skipped
    // stretches without noise would time the first noise point.
    let code = ExConvCode::new(4 * STREAMED);
    let runs = |at: usize| {
        let mut x = vec![0u8; code.n()];
        x[at] = 1;
        PLANE_RUNS.with(|n| n.set(0));
        code.dual_encode(&mut x);
        PLANE_RUNS.with(|n| n.get())
    };
    if Kernel::best() != Kernel::Portable {
        let early = runs(code.k());
        assert!(early > 0);
        assert_eq!(early, runs(code.n() - 1));
    }
}

#[test]
fn bits_and_blocks_encode_alike() {
    // Encoding a 0/1 vector as bits or as blocks of 0/1 agrees: what
    // the silent OT receiver's choice bits rely on.
    let mut rng = StdRng::seed_from_u64(2);
    let code = ExConvCode::new(5000);
    let bits: Vec<u8> = (0..code.n()).map(|_| rng.gen_range(0..2)).collect();
    let mut blocks: Vec<u128> = bits.iter().map(|&b| u128::from(b)).collect();
    let mut encoded = bits.clone();
    code.dual_encode(&mut encoded);
    code.dual_encode(&mut blocks);
    let as_bits: Vec<u8> = blocks[..code.k()].iter().map(|&b| b as u8).collect();
    assert_eq!(encoded[..code.k()], as_bits[..]);
}

#[test]
fn a_single_noise_entry_spreads_over_many_outputs() {
    // The convolution is an accumulator: a tail entry reaches about
    // half of all later entries, so about half of the outputs. Far
    // fewer would mean a broken pass.
    let code = ExConvCode::new(1 << 14);
    for i in [code.k(), code.k() + 7, code.n() - 1] {
        let mut x = vec![0u8; code.n()];
        x[i] = 1;
        code.dual_encode(&mut x);
        let weight = x[..code.k()].iter().filter(|&&b| b == 1).count();
        assert!(
            weight > code.k() / 4,
            "entry {i} reaches only {weight} outputs"
        );
    }
}

#[test]
fn bits_spread_to_bytes_and_gather_back() {
    for b in 0..256u64 {
        let want = (0..8).fold(0u64, |w, k| w | ((b >> k) & 1) << (8 * k));
        assert_eq!(spread_bits(b), want, "byte {b:#x}");
        for j in 0..8 {
            assert_eq!(
                gather_bits(spread_bits(b) << j, j),
                b,
                "byte {b:#x}, plane {j}"
            );
        }
    }
}
