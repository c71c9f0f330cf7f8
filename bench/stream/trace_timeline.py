#!/usr/bin/env python3
"""bench/stream/trace_timeline.py — where a streamed step's time goes, from the
lane trace `ORAKUL_STREAM_TRACE=path orakul run ...` writes (copy_engine.h:
lines "lane kind tag start_ms end_ms"; lane 0 compute, 1 H2D, 2 D2H, 3 DEC; kind 0 copy,
1 decode, 2 wait, 3 mark; compute-lane marks: -1 pass begin, -2 pass end, else
the block entered).

Per step (pass begin to the next pass begin; the first step is left out: it
codes and warms up) it splits the compute lane into the forward (pass begin to
the first block entered a second time), the backward (to pass end) and the tail
(the optimizer step and the host until the next pass), and says for each window
how long the compute lane stood waiting for loads and how the H2D lane spent it
(copying, waiting for a free slot or ring bytes, idle), and how long the DEC lane
decoded (traces before the DEC lane: the H2D lane's own decodes). Then, per block of the
median step: the compute lane's time from its enter to the next mark, and the
wait inside it.

Usage: trace_timeline.py TRACE [--blocks]"""
import statistics
import sys


def overlap(items, w0, w1):
    return sum(max(0.0, min(b, w1) - max(a, w0)) for a, b in items)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    rows = []
    with open(sys.argv[1]) as f:
        for n, line in enumerate(f, 1):
            p = line.split()
            if len(p) != 5:
                print(f"{sys.argv[1]}:{n}: expected 5 fields, got {len(p)}", file=sys.stderr)
                return 1
            rows.append((int(p[0]), int(p[1]), int(p[2]), float(p[3]), float(p[4])))
    marks = sorted((r for r in rows if r[0] == 0 and r[1] == 3), key=lambda r: r[3])
    cwait = sorted((r[3], r[4]) for r in rows if r[0] == 0 and r[1] == 2)
    lane = {k: sorted((r[3], r[4]) for r in rows if r[0] == 1 and r[1] == k) for k in (0, 1, 2)}
    dec = sorted((r[3], r[4]) for r in rows if r[0] == 3 and r[1] == 1)
    d2h = sorted((r[3], r[4]) for r in rows if r[0] == 2 and r[1] == 0)
    # passes: (begin, end, marks); training passes turn (a block entered again
    # after a later one), forward-only ones (samples) do not
    passes, cur = [], None
    for m in marks:
        if m[2] == -1:
            cur = [m[3], None, []]
            passes.append(cur)
        elif cur is not None and m[2] == -2:
            cur[1] = m[3]
        elif cur is not None:
            cur[2].append(m)
    turns = lambda ents: next((i for i in range(1, len(ents)) if ents[i][2] <= ents[i - 1][2]), None)
    # steps: a training pass followed at once by another (its tail ends there); the first left out
    pairs = [(p, q) for p, q in zip(passes, passes[1:]) if p[1] is not None and turns(p[2]) and turns(q[2])][1:]
    if not pairs:
        print("fewer than 2 whole training steps in the trace")
        return 1
    steps = []
    for p, q in pairs:
        s0, end, ents, s1 = p[0], p[1], p[2], q[0]
        ms = ents
        t_turn = ents[turns(ents)][3]
        wins = {"forward": (s0, t_turn), "backward": (t_turn, end), "tail": (end, s1)}
        st = {"step": s1 - s0, "blocks": [], "start": (ents[0][3] - s0) if ents else 0.0}
        for name, (w0, w1) in wins.items():
            busy_c, busy_d, lw = (overlap(lane[k], w0, w1) for k in (0, 1, 2))
            st[name] = dict(dur=w1 - w0, cwait=overlap(cwait, w0, w1), copy=busy_c, decode=busy_d + overlap(dec, w0, w1),
                            lwait=lw, idle=(w1 - w0) - busy_c - busy_d - lw, d2h=overlap(d2h, w0, w1))
        # the tail's own marks (train.c: -3 norm, -4 optimizer enqueued, -5 next step, -6 inputs up)
        tm = [m for m in marks if end <= m[3] <= s1 and m[2] <= -3] + [(0, 3, -1, s1, s1)]
        st["tail_parts"] = {f"{a[2]}..{b[2]}": b[3] - a[3] for a, b in zip([(0, 3, -2, end, end)] + tm, tm)}
        nxt = [m[3] for m in ms[1:]] + [end]
        for i, m in enumerate(ms):
            if m[2] < 0:
                continue
            t1 = nxt[i]
            st["blocks"].append((m[2], "F" if m[3] < t_turn else "B", t1 - m[3], overlap(cwait, m[3], t1)))
        steps.append(st)
    med = lambda f: statistics.median(f(s) for s in steps)
    print(f"{len(steps)} training steps (the first left out); medians, ms:")
    print(f"  step {med(lambda s: s['step']):.1f}")
    print("  window      dur  compute-waits  H2D: copy  decode  wait-slot  idle   D2H")
    for w in ("forward", "backward", "tail"):
        g = lambda k: med(lambda s: s[w][k])
        print(f"  {w:9s} {g('dur'):6.1f}  {g('cwait'):12.1f}  {g('copy'):9.1f} {g('decode'):7.1f} {g('lwait'):9.1f}"
              f" {g('idle'):6.1f} {g('d2h'):6.1f}")
    # the model's set-up: long when its uploads queue behind H2D copies (docs/streaming.md §2a)
    print(f"  forward start: pass begin -> first block {med(lambda s: s['start']):.1f}")
    names = {-2: "pass end", -3: "norm", -4: "optimizer enqueued", -5: "next step", -6: "inputs up", -1: "pass begin"}
    keys = steps[0]["tail_parts"].keys()
    if all(s["tail_parts"].keys() == keys for s in steps):
        print("  tail: " + ", ".join(f"{names.get(int(k.split('..')[0]), k)} -> {names.get(int(k.split('..')[1]), k)} "
                                     f"{med(lambda s: s['tail_parts'][k]):.1f}" for k in keys))
    if "--blocks" in sys.argv:
        s = sorted(steps, key=lambda s: s["step"])[len(steps) // 2]
        print("  block  pass  compute-lane ms  of it waiting")
        for b, d, t, w in s["blocks"]:
            print(f"  {b:5d}  {d:4s}  {t:15.2f}  {w:13.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
