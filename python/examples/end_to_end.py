"""Every protocol family from Python on generated data, checked against the
plaintext truth (the Python counterpart of `psikit demo`).

    python python/examples/end_to_end.py [--server-items N] [--client-items M]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time
from pathlib import Path

import psikit

NORM = ("trim", "lower")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server-items", type=int, default=20_000)
    ap.add_argument("--client-items", type=int, default=1_000)
    args = ap.parse_args()
    rng = random.Random(2026)
    server = [f"user{i}-{rng.getrandbits(32):08x}@example.org" for i in range(args.server_items)]
    client = [f"other{i}@example.net" for i in range(args.client_items // 2)]
    client += [s.upper() for s in rng.sample(server, args.client_items - len(client))]
    rng.shuffle(client)
    held = set(server)
    truth = [c for c in client if c.lower() in held]
    labels = {s: f"tier{i % 4}" for i, s in enumerate(server)}

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t = time.perf_counter()
        psikit.filter.setup(server, tmp / "filter", normalize=NORM)
        psikit.he.build_db(labels, tmp / "he", normalize=NORM, client_items=args.client_items)
        print(f"server states built in {time.perf_counter() - t:.1f} s")
        with psikit.Server(filter_state=str(tmp / "filter"), he_state=str(tmp / "he")) as srv:
            t = time.perf_counter()
            got = psikit.filter.query(srv.addr, client, normalize=NORM)
            assert got == truth, "filter: wrong result"
            print(f"filter: {len(got)} of {len(client)} matched in {time.perf_counter() - t:.2f} s")
            t = time.perf_counter()
            got = psikit.he.query(srv.addr, client, normalize=NORM)
            assert got == {c: labels[c.lower()] for c in truth}, "he: wrong result"
            print(f"he: {len(got)} matched with labels in {time.perf_counter() - t:.2f} s")

        for protocol, malicious in (("vole", False), ("rr16", True)):
            ready, addr, out = threading.Event(), [], {}

            def receiver() -> None:
                out["got"] = psikit.psi.receive(
                    client, listen="127.0.0.1:0", normalize=NORM, protocol=protocol,
                    malicious=malicious, on_listening=lambda a: (addr.append(a), ready.set()),
                )

            t = time.perf_counter()
            th = threading.Thread(target=receiver)
            th.start()
            ready.wait(60)
            psikit.psi.send(server, connect=addr[0], normalize=NORM, protocol=protocol, malicious=malicious)
            th.join()
            assert out["got"] == truth, f"{protocol}: wrong result"
            mode = "malicious" if malicious else "semi-honest"
            print(f"psi {protocol} ({mode}): {len(truth)} matched in {time.perf_counter() - t:.2f} s")

        # Circuit PSI: the intersection's size and a threshold on it, not
        # the intersection (the client holds the cuckoo table).
        for app, kw in (("cardinality", {}), ("threshold", {"threshold": len(set(truth))})):
            ready, addr, out = threading.Event(), [], {}

            def cpsi_receiver() -> None:
                out["got"] = psikit.cpsi.receive(
                    app, client, listen="127.0.0.1:0", normalize=NORM,
                    on_listening=lambda a: (addr.append(a), ready.set()), **kw,
                )

            t = time.perf_counter()
            th = threading.Thread(target=cpsi_receiver)
            th.start()
            ready.wait(60)
            sent = psikit.cpsi.send(app, server, connect=addr[0], normalize=NORM, **kw)
            th.join()
            got = out["got"]
            assert not sent.learned, f"cpsi {app}: the sender learned the result"
            want = {"cardinality": (len(set(truth)), None), "threshold": (None, True)}[app]
            assert (got.intersection_size, got.threshold_reached) == want, f"cpsi {app}: wrong result"
            print(f"cpsi {app}: {want[0] if want[1] is None else want[1]} in {time.perf_counter() - t:.2f} s")
    print("all results match the plaintext truth")


if __name__ == "__main__":
    main()
