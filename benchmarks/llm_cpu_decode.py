"""A small dense LLM run for real on this CPU against hetsim's prediction of it.

A Llama-style decoder (random float32 weights; 4 layers of width 1024, 16 heads, 4
KV heads, SwiGLU 2816, vocabulary 8192) runs its prefill (128 prompt tokens) and
decode steps (KV cache of 512 tokens) in torch on one thread of this machine. The
same model's graphs (``hetsim.graphs.llm.llm_graph``) are simulated on one worker of
the ``cpu2`` platform, priced two ways:

* ``profile``: every op of the graph timed inside the model's own passes (median over
  passes other than the timed ones: this machine's profile of its GEMVs, GEMMs, norms
  and attention at these shapes), replayed by the simulator on the graph;
* ``roofline``: the analytic roofline of the ``cpu2`` preset (nominal peak and
  bandwidth), stated as such.

Times are this thread's CPU time (``time.thread_time``), so that other processes on
the shared machine do not count. Target: decode tokens/s and time to first token
within 10 % with the profile::

    python benchmarks/llm_cpu_decode.py [--steps 40] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from hetsim import schedulers
from hetsim.costmodel import Roofline
from hetsim.costmodel.platform import Platform
from hetsim.graphs.llm import Architecture, llm_graph

CFG = Architecture("bench-small", "llama", hidden=1024, layers=4, heads=16, kv_heads=4, head_dim=0, ffn=2816,
                   vocab=8192, max_context=1024)
PROMPT, KV = 128, 512
#: this thread's CPU time: on the shared 2-core machine (load averages of 10+ while
#: others work) wall time mostly measures preemption; with one torch thread the
#: kernels run on this thread, so its CPU time is the pass's time on an idle machine
CLOCK = time.thread_time


class Model:
    """The decoder of ``CFG``, op for op as ``llm_graph`` describes it."""

    def __init__(self, c: Architecture) -> None:
        g = torch.Generator().manual_seed(0)

        def w(*shape: int) -> torch.Tensor:
            return torch.randn(*shape, generator=g) * 0.02

        self.c = c
        self.emb, self.out, self.norm = w(c.vocab, c.hidden), w(c.vocab, c.hidden), torch.ones(c.hidden)
        self.layers = [dict(an=torch.ones(c.hidden), q=w(c.hidden, c.hidden), k=w(c.kv_dim, c.hidden),
                            v=w(c.kv_dim, c.hidden), o=w(c.hidden, c.hidden), fn=torch.ones(c.hidden),
                            g=w(c.ffn, c.hidden), u=w(c.ffn, c.hidden), d=w(c.hidden, c.ffn))
                       for _ in range(c.layers)]

    @staticmethod
    def rms(x: torch.Tensor, wt: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * wt

    @staticmethod
    def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        a, b = x[..., ::2], x[..., 1::2]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)

    def forward(self, tokens: torch.Tensor, kc: list, vc: list, pos: int, clock: dict | None = None) -> torch.Tensor:
        """One pass; with ``clock``, the seconds of each graph node are added to ``clock[node]``."""
        c, (B, T) = self.c, tokens.shape
        H, KH, d = c.heads, c.kv_heads, c.head_dim
        last = [CLOCK()]

        def tick(node: str) -> None:
            if clock is not None:
                now = CLOCK()
                clock[node] = clock.get(node, 0.0) + now - last[0]
                last[0] = now

        ang = torch.arange(pos, pos + T, dtype=torch.float32)[:, None] * torch.ones(d // 2)
        cos, sin = ang.cos()[:, None], ang.sin()[:, None]
        x = F.embedding(tokens, self.emb)
        tick("token_embd")
        for i, L in enumerate(self.layers):
            p = f"blk.{i}."
            xn = self.rms(x, L["an"])
            tick(p + "attn_norm")
            q = xn @ L["q"].T
            tick(p + "attn_q")
            k = xn @ L["k"].T
            tick(p + "attn_k")
            v = (xn @ L["v"].T).view(B, T, KH, d)
            tick(p + "attn_v")
            q, k = self.rope(q.view(B, T, H, d), cos, sin), self.rope(k.view(B, T, KH, d), cos, sin)
            tick(p + "rope")
            kc[i][:, :, pos:pos + T], vc[i][:, :, pos:pos + T] = k.transpose(1, 2), v.transpose(1, 2)
            a = F.scaled_dot_product_attention(q.transpose(1, 2), kc[i][:, :, :pos + T], vc[i][:, :, :pos + T],
                                               is_causal=T > 1, enable_gqa=True)
            tick(p + "attn")
            o = a.transpose(1, 2).reshape(B, T, -1) @ L["o"].T
            tick(p + "attn_output")
            x = x + o
            tick(p + "attn_residual")
            xn = self.rms(x, L["fn"])
            tick(p + "ffn_norm")
            g = xn @ L["g"].T
            tick(p + "ffn_gate")
            u = xn @ L["u"].T
            tick(p + "ffn_up")
            h = F.silu(g) * u
            tick(p + "ffn_act")
            dn = h @ L["d"].T
            tick(p + "ffn_down")
            x = x + dn
            tick(p + "ffn_residual")
        xn = self.rms(x[:, -1], self.norm)
        tick("output_norm")
        out = xn @ self.out.T
        tick("output")
        return out


def median_time(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = CLOCK()
        fn()
        times.append(CLOCK() - t0)
    return statistics.median(times)


def measured(m: Model, steps: int) -> tuple[float, float]:
    """(decode step seconds at KV length KV, prefill seconds of PROMPT tokens), medians."""
    c = m.c
    kc = [torch.randn(1, c.kv_heads, c.max_context, c.head_dim) for _ in range(c.layers)]
    vc = [torch.randn(1, c.kv_heads, c.max_context, c.head_dim) for _ in range(c.layers)]
    tok = torch.tensor([[7]])
    prompt = torch.randint(0, c.vocab, (1, PROMPT))
    with torch.inference_mode():
        decode = median_time(lambda: m.forward(tok, kc, vc, KV - 1), steps)
        prefill = median_time(lambda: m.forward(prompt, kc, vc, 0), max(3, steps // 8))
    return decode, prefill


class InContextProfile:
    """Each node's time measured inside the model's own passes (median over passes):
    this machine's profile of its GEMVs, GEMMs, norms and attention at these shapes, in
    the cache and memory state the model leaves them (an op timed alone in a loop runs
    2-3x faster here: its weights stay warmer than in the model)."""

    def __init__(self, m: Model, phase: str, repeats: int) -> None:
        c = m.c
        kc = [torch.randn(1, c.kv_heads, c.max_context, c.head_dim) for _ in range(c.layers)]
        vc = [torch.randn(1, c.kv_heads, c.max_context, c.head_dim) for _ in range(c.layers)]
        tokens = torch.tensor([[7]]) if phase == "decode" else torch.randint(0, c.vocab, (1, PROMPT))
        pos = KV - 1 if phase == "decode" else 0
        runs: list[dict[str, float]] = []
        with torch.inference_mode():
            for _ in range(repeats + 1):
                clock: dict[str, float] = {}
                m.forward(tokens, kc, vc, pos, clock)
                runs.append(clock)
        self.times = {n: statistics.median(r[n] for r in runs[1:]) for n in runs[0]}

    def op_time(self, graph, node, device) -> float:
        return self.times[node]

    def transfer_time(self, nbytes, link) -> float:
        return Roofline().transfer_time(nbytes, link)

    def dispatch_time(self, graph, node, device) -> float:
        return 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40, help="decode steps timed (median)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (cpu2's workers are single-threaded)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    m = Model(CFG)
    dec_real, pre_real = measured(m, args.steps)
    platform = Platform.preset("cpu2")
    graphs = {"decode": llm_graph(CFG, phase="decode", kv_length=KV, context=CFG.max_context, weights="f32",
                                  kv_dtype="f32"),
              "prefill": llm_graph(CFG, phase="prefill", tokens=PROMPT, context=CFG.max_context, weights="f32",
                                   kv_dtype="f32")}
    real = {"decode": dec_real, "prefill": pre_real}
    print(f"{CFG.name}: {CFG.parameters() / 1e6:.0f} M parameters, float32, {args.threads} thread(s); "
          f"decode at KV {KV}, prefill of {PROMPT} tokens")
    print(f"{'phase':8} {'measured':>10} {'profile':>10} {'error':>8} {'roofline':>10} {'error':>8}")
    for phase, g in graphs.items():
        prof = InContextProfile(m, phase, max(5, args.steps // (1 if phase == "decode" else 8)))
        sim = {}
        for name, cost in (("profile", prof), ("roofline", Roofline())):
            sim[name] = schedulers.get("all-cpu").run(g, platform, cost).result.makespan
        r = real[phase]
        print(f"{phase:8} {r * 1e3:9.2f}ms {sim['profile'] * 1e3:9.2f}ms {100 * (sim['profile'] / r - 1):+7.1f}% "
              f"{sim['roofline'] * 1e3:9.2f}ms {100 * (sim['roofline'] / r - 1):+7.1f}%")
    print(f"decode tokens/s measured {1 / dec_real:.1f}; TTFT measured {pre_real * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
