#!/usr/bin/env python3
"""tilejit beside PyTorch's attention kernels and Triton, in one process, on identical inputs (issue 3).

Protocol of the FlashAttention papers: batch·seqlen = 16384 tokens, hidden 2048 (heads = 2048 / head_dim),
head dims 64 and 128, seqlens 512 … 16384, causal and not, bf16, inputs [batch, heads, seqlen, head_dim].
Forward FLOPs = 4·batch·heads·seqlen²·head_dim, halved when causal.

For each shape: tilejit's output (autotuned config) is first checked against PyTorch's SDPA math backend in
float32 (relative Frobenius error over a slice of heads, bound 1e-2); then every implementation is timed on
the same tensors (triton.testing.do_bench, median, with its L2 flush; CUDA-event fallback): tilejit, SDPA
FLASH_ATTENTION (FlashAttention-2), CUDNN_ATTENTION, EFFICIENT_ATTENTION, FlexAttention (torch.compile'd;
causal through a block mask) and Triton's fused-attention tutorial kernel when its source ships with the
installed triton package (otherwise "unavailable"; it is never copied into this repository). Each peer is
wrapped in try/except so one failure does not lose the table. Then matmul: tilejit_matmul (autotuned) vs
torch.matmul at 4096³ and 8192³ bf16. Then compile times of one attention variant: cold (fresh process,
empty TILEJIT_CACHE_DIR) and warm (second process, disk-cache hit), split into trace / codegen / link / load.

Usage (GPU machine, PyTorch + Triton installed):
  python3 bench/side_by_side.py --lib carry/libtilejit.so.0 [--quick] [--shapes d64] [--out results.md]
TILEJIT_PRINT_AUTOTUNING=1 also prints the autotuner's tables (stderr).
"""
import argparse
import ctypes
import glob
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback

# ---------------------------------------------------------------------------------------------- tilejit


class CompileStats(ctypes.Structure):
    _fields_ = [("trace_ms", ctypes.c_double), ("codegen_ms", ctypes.c_double), ("link_ms", ctypes.c_double),
                ("load_ms", ctypes.c_double), ("total_ms", ctypes.c_double), ("source", ctypes.c_char * 16)]


def load_tilejit(path):
    lib = ctypes.CDLL(os.path.abspath(path))
    i64p = ctypes.POINTER(ctypes.c_int64)
    vp = ctypes.c_void_p
    c_int = ctypes.c_int
    lib.tilejit_attention_forward.argtypes = [vp, vp, vp, vp, vp, c_int, c_int, c_int, c_int, c_int, c_int,
                                              i64p, i64p, i64p, i64p, c_int, ctypes.c_float, c_int, vp]
    lib.tilejit_attention_forward.restype = c_int
    lib.tilejit_matmul.argtypes = [vp, vp, vp, c_int, c_int, c_int, c_int, vp]
    lib.tilejit_matmul.restype = c_int
    lib.tilejit_attention_compile.argtypes = [c_int] * 8 + [ctypes.POINTER(CompileStats)]
    lib.tilejit_attention_compile.restype = c_int
    lib.tilejit_last_error.restype = ctypes.c_char_p
    lib.tilejit_version.restype = ctypes.c_char_p
    return lib


def tj_check(lib, rc, what):
    if rc != 0:
        raise RuntimeError(f"{what} failed ({rc}): {lib.tilejit_last_error().decode()}")


def strides4(t):
    return (ctypes.c_int64 * 4)(*t.stride())


def tilejit_attention(lib, q, k, v, out, lse, causal, autotune=True):
    """q, k, v, out: [b, h, s, d] bf16/f16 CUDA tensors (any strides with the last dim contiguous)."""
    import torch
    b, h, sq, d = q.shape
    sk = k.shape[2]
    dtype = 0 if q.dtype == torch.bfloat16 else 1
    rc = lib.tilejit_attention_forward(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                                       lse.data_ptr() if lse is not None else None, dtype, b, h, sq, sk, d,
                                       strides4(q), strides4(k), strides4(v), strides4(out), int(causal),
                                       ctypes.c_float(0.0), int(autotune), torch.cuda.current_stream().cuda_stream)
    tj_check(lib, rc, "tilejit_attention_forward")


def tilejit_matmul(lib, a, b, c):
    import torch
    dtype = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}[a.dtype]
    M, K = a.shape
    N = b.shape[1]
    rc = lib.tilejit_matmul(a.data_ptr(), b.data_ptr(), c.data_ptr(), M, N, K, dtype,
                            torch.cuda.current_stream().cuda_stream)
    tj_check(lib, rc, "tilejit_matmul")


# ------------------------------------------------------------------------------------------------ timing


def median_ms(fn, warmup=5, reps=30):
    import torch
    try:
        import triton.testing
        return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))
    except ImportError:
        pass
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]


# ----------------------------------------------------------------------------------------------- shapes


def protocol_shapes(quick):
    seqlens = [1024, 4096] if quick else [512, 1024, 2048, 4096, 8192, 16384]
    shapes = []
    for d in (64, 128):
        for causal in (False, True):
            for s in seqlens:
                shapes.append(dict(batch=16384 // s, heads=2048 // d, seqlen=s, head_dim=d, causal=causal))
    return shapes


def shape_name(sh):
    return f"d{sh['head_dim']}-s{sh['seqlen']}-b{sh['batch']}-h{sh['heads']}" + ("-causal" if sh["causal"] else "")


def attention_flops(sh):
    f = 4.0 * sh["batch"] * sh["heads"] * sh["seqlen"] ** 2 * sh["head_dim"]
    return f / 2 if sh["causal"] else f


# ------------------------------------------------------------------------------------------------ peers


def find_triton_tutorial():
    """Triton's fused-attention tutorial, if its source is installed with triton (no network)."""
    try:
        import triton
    except ImportError:
        return None, "triton not installed"
    roots = {os.path.dirname(triton.__file__), os.path.dirname(os.path.dirname(triton.__file__)), "/usr/share",
             "/usr/local/share", "/opt"}
    for root in roots:
        for pattern in ("**/*fused-attention*.py", "**/*fused_attention*.py"):
            for path in glob.glob(os.path.join(root, pattern), recursive=True):
                # Other packages ship files of that name too (jax's cuDNN wrapper): only Triton's tutorial.
                if "triton" in path.lower() and "tutorial" in path.lower():
                    return path, None
    return None, "the tutorial's source is not shipped with the installed triton"


def load_triton_attention():
    path, why = find_triton_tutorial()
    if not path:
        return None, why
    if importlib.util.find_spec("pytest") is None:  # the tutorial imports pytest for its tests only
        import types
        sys.modules["pytest"] = types.ModuleType("pytest")
        sys.modules["pytest"].mark = types.SimpleNamespace(parametrize=lambda *a, **k: (lambda f: f))
    spec = importlib.util.spec_from_file_location("triton_fused_attention_tutorial", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fn = getattr(mod, "attention", None)
    if fn is None:
        return None, f"{path} has no 'attention'"

    def call(q, k, v, causal, scale):
        try:
            return fn(q, k, v, causal, scale, False)  # 3.x: (q, k, v, causal, sm_scale, warp_specialize)
        except TypeError:
            return fn(q, k, v, causal, scale)
    return call, path


def make_peers(args):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    peers = {}

    def sdpa(backend):
        def run(q, k, v, causal):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return run
    peers["FA2"] = sdpa(SDPBackend.FLASH_ATTENTION)
    peers["cuDNN"] = sdpa(SDPBackend.CUDNN_ATTENTION)
    peers["mem-eff"] = sdpa(SDPBackend.EFFICIENT_ATTENTION)
    notes = {}
    try:
        import torch._dynamo
        for knob in ("cache_size_limit", "recompile_limit"):  # one compile per shape; never fall back to eager
            if hasattr(torch._dynamo.config, knob):
                setattr(torch._dynamo.config, knob, 256)
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        flex = torch.compile(flex_attention, dynamic=False)
        masks = {}

        def run_flex(q, k, v, causal):
            if not causal:
                return flex(q, k, v)
            key = (q.shape[2], k.shape[2])
            if key not in masks:
                masks[key] = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, key[0], key[1],
                                               device=q.device)
            return flex(q, k, v, block_mask=masks[key])
        peers["Flex"] = run_flex
    except Exception as ex:  # noqa: BLE001
        notes["Flex"] = f"unavailable: {ex}"
    try:
        tri, where = load_triton_attention()
        if tri:
            peers["Triton"] = lambda q, k, v, causal: tri(q, k, v, causal, 1.0 / math.sqrt(q.shape[-1]))
            notes["Triton"] = f"tutorial from {where}"
        else:
            notes["Triton"] = f"unavailable: {where}"
    except Exception as ex:  # noqa: BLE001
        notes["Triton"] = f"unavailable: {type(ex).__name__}: {ex}"
    return peers, notes


# -------------------------------------------------------------------------------------------- attention


def check_attention(q, k, v, out, causal, max_heads):
    """Relative Frobenius error of out vs SDPA's math backend in float32, over the first max_heads (b, h)."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    b, h, s, d = q.shape
    flat = lambda t: t.reshape(b * h, 1, t.shape[2], d)  # noqa: E731
    qf, kf, vf, of = flat(q), flat(k), flat(v), flat(out)
    n = min(b * h, max_heads)
    chunk = max(1, (1 << 31) // (s * s * 4))  # ≤ 2 GiB of f32 scores per step
    err2 = ref2 = 0.0
    with sdpa_kernel(SDPBackend.MATH):
        for i in range(0, n, chunk):
            j = min(n, i + chunk)
            ref = F.scaled_dot_product_attention(qf[i:j].float(), kf[i:j].float(), vf[i:j].float(), is_causal=causal)
            got = of[i:j].float()
            if not torch.isfinite(got).all():
                return float("inf"), n
            err2 += (got - ref).pow(2).sum().item()
            ref2 += ref.pow(2).sum().item()
    return math.sqrt(err2 / max(ref2, 1e-300)), n


def run_attention(lib, args, shapes, peers, notes):
    import torch
    rows = []
    names = ["tilejit"] + list(peers)
    for sh in shapes:
        name = shape_name(sh)
        b, h, s, d, causal = sh["batch"], sh["heads"], sh["seqlen"], sh["head_dim"], sh["causal"]
        torch.manual_seed(0)
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        out = torch.empty_like(q)
        lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
        flops = attention_flops(sh)
        row = dict(shape=name, **sh, tflops={}, errors={})
        try:
            t0 = time.perf_counter()
            tilejit_attention(lib, q, k, v, out, lse, causal)  # tunes on the first call of a shape bucket
            torch.cuda.synchronize()
            row["first_call_s"] = time.perf_counter() - t0
            out.fill_(float("nan"))
            tilejit_attention(lib, q, k, v, out, lse, causal)
            torch.cuda.synchronize()
            err, nheads = check_attention(q, k, v, out, causal, 64 if s <= 2048 else 8)
            row["check"] = err
            row["check_heads"] = nheads
        except Exception as ex:  # noqa: BLE001
            row["errors"]["tilejit"] = str(ex)
        for impl in names:
            if impl in row["errors"]:
                continue
            try:
                if impl == "tilejit":
                    fn = lambda: tilejit_attention(lib, q, k, v, out, lse, causal)  # noqa: E731
                else:
                    peer = peers[impl]
                    fn = lambda: peer(q, k, v, causal)  # noqa: E731
                    fn()  # compile / first-call costs outside the timing
                ms = median_ms(fn)
                row["tflops"][impl] = flops / (ms * 1e-3) / 1e12
            except Exception as ex:  # noqa: BLE001
                row["errors"][impl] = f"{type(ex).__name__}: {str(ex).splitlines()[0][:120] if str(ex) else ''}"
        rows.append(row)
        print_attention_row(row, names)
        del q, k, v, out, lse
        torch.cuda.empty_cache()
    return rows, names


def fmt_tf(row, impl):
    if impl in row["tflops"]:
        return f"{row['tflops'][impl]:.1f}"
    return "err" if impl in row["errors"] else "n/a"


def ratio(row, a, b):
    ta, tb = row["tflops"].get(a), row["tflops"].get(b)
    return f"{ta / tb:.2f}x" if ta and tb else "-"


def print_attention_row(row, names):
    check = row.get("check")
    status = "-" if check is None else f"{check:.2e} {'PASS' if check <= 1e-2 else 'FAIL'}"
    cells = " ".join(f"{fmt_tf(row, n):>8}" for n in names)
    print(f"{row['shape']:<28} {status:<16} {cells} {ratio(row, 'tilejit', 'FA2'):>9} "
          f"{ratio(row, 'tilejit', 'cuDNN'):>9}", flush=True)
    if "first_call_s" in row:
        print(f"    tilejit first call (autotuning when the shape bucket is new): {row['first_call_s']:.2f} s",
              flush=True)
    for impl, e in row["errors"].items():
        print(f"    {impl}: {e}", flush=True)


def attention_markdown(rows, names):
    head = ("| shape | check (rel. Frob. vs fp32 math) | " + " | ".join(f"{n} TFLOP/s" for n in names) +
            " | tilejit/FA2 | tilejit/cuDNN |")
    lines = [head, "|" + "---|" * (len(names) + 4)]
    for r in rows:
        check = r.get("check")
        status = "error" if check is None else f"{check:.2e} {'PASS' if check <= 1e-2 else 'FAIL'} ({r['check_heads']} heads)"
        lines.append(f"| {r['shape']} | {status} | " + " | ".join(fmt_tf(r, n) for n in names) +
                     f" | {ratio(r, 'tilejit', 'FA2')} | {ratio(r, 'tilejit', 'cuDNN')} |")
    errors = [f"- {r['shape']} {impl}: {e}" for r in rows for impl, e in r["errors"].items()]
    return "\n".join(lines + ([""] + ["Errors:"] + errors if errors else []))


# ----------------------------------------------------------------------------------------------- matmul


def run_matmul(lib, sizes):
    import torch
    rows = []
    for n in sizes:
        row = dict(size=n, errors={})
        torch.manual_seed(0)
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        flops = 2.0 * n ** 3
        try:
            t0 = time.perf_counter()
            tilejit_matmul(lib, a, b, c)
            torch.cuda.synchronize()
            row["first_call_s"] = time.perf_counter() - t0
            c.fill_(float("nan"))
            tilejit_matmul(lib, a, b, c)
            ref = a.float() @ b.float()
            row["check"] = ((c.float() - ref).norm() / ref.norm()).item()
            row["tilejit"] = flops / (median_ms(lambda: tilejit_matmul(lib, a, b, c)) * 1e-3) / 1e12
        except Exception as ex:  # noqa: BLE001
            row["errors"]["tilejit"] = str(ex)
        try:
            row["torch"] = flops / (median_ms(lambda: torch.matmul(a, b)) * 1e-3) / 1e12
        except Exception as ex:  # noqa: BLE001
            row["errors"]["torch"] = str(ex)
        r = f"{row['tilejit'] / row['torch']:.2f}x" if "tilejit" in row and "torch" in row else "-"
        chk = f"{row['check']:.2e}" if "check" in row else "-"
        print(f"matmul {n}^3 bf16: tilejit {row.get('tilejit', float('nan')):.1f} TFLOP/s, torch.matmul "
              f"{row.get('torch', float('nan')):.1f} TFLOP/s, ratio {r}, rel. error {chk}", flush=True)
        for impl, e in row["errors"].items():
            print(f"    {impl}: {e}", flush=True)
        rows.append(row)
    return rows


def matmul_markdown(rows):
    lines = ["| M=N=K (bf16) | check (rel. Frob. vs fp32) | tilejit TFLOP/s | torch.matmul TFLOP/s | tilejit/torch |",
             "|---|---|---:|---:|---:|"]
    for r in rows:
        t, p = r.get("tilejit"), r.get("torch")
        chk = f"{r['check']:.2e}" if "check" in r else "error"
        lines.append(f"| {r['size']} | {chk} | {f'{t:.1f}' if t else 'err'} | {f'{p:.1f}' if p else 'err'} | "
                     f"{f'{t / p:.2f}x' if t and p else '-'} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ compile time


def compile_probe(lib_path, cfg):
    """Runs in a child process: compile one attention variant, print its statistics as JSON."""
    lib = load_tilejit(lib_path)
    st = CompileStats()
    t0 = time.perf_counter()
    rc = lib.tilejit_attention_compile(0, cfg["head_dim"], int(cfg["causal"]), cfg["seqlen"], cfg["block_m"],
                                       cfg["block_n"], cfg["num_warps"], cfg["num_stages"], ctypes.byref(st))
    wall = (time.perf_counter() - t0) * 1e3
    if rc != 0:
        print(json.dumps(dict(error=lib.tilejit_last_error().decode())))
        return
    print(json.dumps(dict(trace_ms=st.trace_ms, codegen_ms=st.codegen_ms, link_ms=st.link_ms, load_ms=st.load_ms,
                          total_ms=st.total_ms, source=st.source.decode(), wall_ms_incl_driver_init=wall)))


def run_compile_times(lib_path, cfg):
    results = {}
    with tempfile.TemporaryDirectory(prefix="tilejit-cold-cache-") as cache:
        env = dict(os.environ, TILEJIT_CACHE_DIR=cache)
        for phase in ("cold", "warm"):
            try:
                p = subprocess.run([sys.executable, os.path.abspath(__file__), "--lib", lib_path, "--compile-probe",
                                    json.dumps(cfg)], env=env, capture_output=True, text=True, timeout=300)
                line = [x for x in p.stdout.splitlines() if x.startswith("{")]
                results[phase] = json.loads(line[-1]) if line else dict(error=p.stderr[-500:])
            except Exception as ex:  # noqa: BLE001
                results[phase] = dict(error=str(ex))
    for phase, r in results.items():
        if "error" in r:
            print(f"compile {phase}: error: {r['error']}")
        else:
            print(f"compile {phase} ({r['source']}): total {r['total_ms']:.1f} ms = trace {r['trace_ms']:.1f} + "
                  f"codegen {r['codegen_ms']:.1f} + link {r['link_ms']:.1f} + load {r['load_ms']:.1f} "
                  f"(+ cache I/O); driver init outside: {r['wall_ms_incl_driver_init'] - r['total_ms']:.0f} ms")
    return results


def compile_markdown(results, cfg):
    lines = [f"Compile time of attention_fwd (bf16, d={cfg['head_dim']}, causal={cfg['causal']}, BLOCK_M={cfg['block_m']}, "
             f"BLOCK_N={cfg['block_n']}, {cfg['num_warps']} warps, {cfg['num_stages']} stages), ms:", "",
             "| run | source | total | trace | codegen (LLVM) | driver link | load |", "|---|---|---:|---:|---:|---:|---:|"]
    for phase, r in results.items():
        if "error" in r:
            lines.append(f"| {phase} | error: {r['error'][:100]} | | | | | |")
        else:
            lines.append(f"| {phase} | {r['source']} | {r['total_ms']:.1f} | {r['trace_ms']:.1f} | {r['codegen_ms']:.1f} | "
                         f"{r['link_ms']:.1f} | {r['load_ms']:.1f} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------- main


def environment_line(lib):
    import torch
    parts = [f"tilejit {lib.tilejit_version().decode()}", f"torch {torch.__version__}",
             f"cuDNN {torch.backends.cudnn.version()}", torch.cuda.get_device_name()]
    try:
        import triton
        parts.append(f"triton {triton.__version__}")
    except ImportError:
        parts.append("triton not installed")
    try:
        drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        parts.append(f"driver {drv}")
    except Exception:  # noqa: BLE001
        pass
    return ", ".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="path to libtilejit.so(.0)")
    ap.add_argument("--quick", action="store_true", help="seqlens 1024 and 4096 only, one matmul size")
    ap.add_argument("--shapes", default="", help="comma-separated substrings; run the shapes whose name "
                    "(e.g. d128-s4096-b4-h16-causal) contains any of them")
    ap.add_argument("--out", default="", help="also write the tables as markdown to this file")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: attention, matmul, compile")
    ap.add_argument("--compile-config", default='{"head_dim": 128, "causal": true, "seqlen": 4096, "block_m": 64, '
                    '"block_n": 64, "num_warps": 4, "num_stages": 1}', help="JSON of the variant timed for compile")
    ap.add_argument("--compile-probe", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.compile_probe:
        compile_probe(args.lib, json.loads(args.compile_probe))
        return 0

    lib = load_tilejit(args.lib)
    env = environment_line(lib)
    print("#", env, flush=True)
    skip = set(filter(None, args.skip.split(",")))
    md = [f"# tilejit side by side ({time.strftime('%Y-%m-%d')})", "", env, ""]

    if "attention" not in skip:
        shapes = protocol_shapes(args.quick)
        if args.shapes:
            keys = [x for x in args.shapes.split(",") if x]
            shapes = [s for s in shapes if any(k in shape_name(s) for k in keys)]
        peers, notes = make_peers(args)
        for k, v in notes.items():
            print(f"# {k}: {v}", flush=True)
        names = ["tilejit"] + list(peers)
        print(f"{'shape':<28} {'check':<16} " + " ".join(f"{n:>8}" for n in names) + f" {'tj/FA2':>9} {'tj/cuDNN':>9}")
        rows, names = run_attention(lib, args, shapes, peers, notes)
        md += ["## Attention forward, bf16, TFLOP/s (FLOPs = 4·b·h·s²·d, halved when causal)", "",
               attention_markdown(rows, names), ""] + [f"- {k}: {v}" for k, v in notes.items()] + [""]
    if "matmul" not in skip:
        mm = run_matmul(lib, [4096] if args.quick else [4096, 8192])
        md += ["## Matmul, bf16", "", matmul_markdown(mm), ""]
    if "compile" not in skip:
        cfg = json.loads(args.compile_config)
        ct = run_compile_times(args.lib, cfg)
        md += ["## Compile time", "", compile_markdown(ct, cfg), ""]
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(md) + "\n")
        print(f"# wrote {args.out}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        sys.exit(1)
