use super::*;

#[test]
fn smoke() {
    let params = EpcParams::new(61, 16).unwrap();
    println!("{params:?} logq {}", params.log_q());
    let (sender, pk) = EpcSender::new(&params).unwrap();
    let receiver = EpcReceiver::new(&params, &pk).unwrap();
    let v: Vec<u64> = (0..5000u64).map(|i| i * 0x1234567 % (1 << 61)).collect();
    let vs: Vec<u64> = v
        .iter()
        .enumerate()
        .map(|(i, &x)| if i % 3 == 0 { x } else { x ^ 1 })
        .collect();
    let batches = sender.encrypt_all(&v).unwrap();
    let (replies, r_star) = receiver.evaluate_all(&batches, &vs).unwrap();
    let r = sender.decrypt_all(&replies, v.len()).unwrap();
    for i in 0..v.len() {
        assert_eq!(r[i] == r_star[i], v[i] == vs[i], "{i}");
    }
}
