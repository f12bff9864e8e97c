#!/usr/bin/env python3
"""tilejit's benchmark suites, on PyTorch tensors through tilejit's C ABI (include/tilejit/c_api.h, ctypes).

  python3 bench/bench.py --lib carry/libtilejit.so.0 protocol mods      # run suites
  python3 bench/bench.py --list                                         # what each suite measures

Each suite writes <results>/<suite>.md (environment, table, method) and <suite>.png, overwritten on every
run. Every implementation is checked against an fp32 reference before it is timed. bench/README.md
describes the columns; bench/device.sh runs suites on the GPU machine.

A suite is a function registered with @suite(name, summary); it gets a Context (arguments, the loaded
library, time budget) and returns nothing: it writes its report with the shared helpers below (timing,
checks, tables, plots). New suites (e.g. backward) are added the same way.
"""
from __future__ import annotations

import argparse
import ctypes
import dataclasses
import glob
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Callable, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BOUND = 1e-2  # relative Frobenius error of a bf16 output against fp32 (bf16 rounding alone gives ~2e-3)
DEVICE = "cuda"  # "cpu" with --smoke: tiny shapes, tilejit on its CPU interpreter (checks the driver itself)

# ============================================================================================ registry


@dataclasses.dataclass
class Suite:
    name: str
    summary: str
    run: Callable[["Context"], None]


SUITES: dict[str, Suite] = {}


def suite(name: str, summary: str):
    """Registers fn(ctx) as the suite `name`."""
    def register(fn):
        SUITES[name] = Suite(name, summary, fn)
        return fn
    return register


# ============================================================================================ the library


class CompileStats(ctypes.Structure):
    """tilejit_compile_stats."""
    _fields_ = [("trace_ms", ctypes.c_double), ("codegen_ms", ctypes.c_double), ("link_ms", ctypes.c_double),
                ("load_ms", ctypes.c_double), ("total_ms", ctypes.c_double), ("source", ctypes.c_char * 16)]


class LaunchConfig(ctypes.Structure):
    """tilejit_launch_config."""
    _fields_ = [("kernel", ctypes.c_char * 32), ("block_m", ctypes.c_int), ("block_n", ctypes.c_int),
                ("block_k", ctypes.c_int), ("num_warps", ctypes.c_int), ("num_stages", ctypes.c_int),
                ("min_ctas_per_sm", ctypes.c_int), ("autotuned", ctypes.c_int), ("copy_method", ctypes.c_int)]


class FlexVariant(ctypes.Structure):
    """tilejit_flex_variant (same field order and types)."""
    _fields_ = [("causal", ctypes.c_int), ("bottom_right", ctypes.c_int), ("window_left", ctypes.c_int),
                ("window_right", ctypes.c_int), ("alibi", ctypes.c_int), ("softcap", ctypes.c_float),
                ("doc_ids", ctypes.c_void_p), ("reuse_block_mask", ctypes.c_int), ("block_m", ctypes.c_int),
                ("block_n", ctypes.c_int), ("num_warps", ctypes.c_int), ("num_stages", ctypes.c_int),
                ("autotune", ctypes.c_int), ("atomics", ctypes.c_int)]


class PagedKV(ctypes.Structure):
    """tilejit_paged_kv (same field order and types)."""
    _fields_ = [("k_pages", ctypes.c_void_p), ("v_pages", ctypes.c_void_p), ("block_table", ctypes.c_void_p),
                ("seq_lens", ctypes.c_void_p), ("dtype", ctypes.c_int), ("num_pages", ctypes.c_int),
                ("page_size", ctypes.c_int), ("heads_kv", ctypes.c_int), ("head_dim", ctypes.c_int),
                ("max_pages_per_seq", ctypes.c_int), ("page_stride", ctypes.c_int64), ("token_stride", ctypes.c_int64),
                ("head_stride", ctypes.c_int64), ("block_table_stride", ctypes.c_int64)]


def _strides(t):
    return (ctypes.c_int64 * 4)(*t.stride())


def _stream():
    import torch
    return torch.cuda.current_stream().cuda_stream if DEVICE == "cuda" else None


def empty_cache():
    import torch
    if DEVICE == "cuda":
        torch.cuda.empty_cache()


def sync():
    import torch
    if DEVICE == "cuda":
        torch.cuda.synchronize()


class Tilejit:
    """libtilejit through its C ABI, on PyTorch CUDA tensors, on PyTorch's current stream."""

    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        # RTLD_GLOBAL: the user-mods example library (linked against libtilejit.so.0) then binds to this very
        # copy (same soname), so both share one CUDA context, kernel cache and autotuner.
        self.lib = lib = ctypes.CDLL(self.path, mode=ctypes.RTLD_GLOBAL)
        vp, ci, cf, i64p = ctypes.c_void_p, ctypes.c_int, ctypes.c_float, ctypes.POINTER(ctypes.c_int64)
        lib.tilejit_attention_forward.argtypes = [vp] * 5 + [ci] * 6 + [i64p] * 4 + [ci, cf, ci, vp]
        lib.tilejit_flex_variant_init.argtypes = [ctypes.POINTER(FlexVariant)]
        lib.tilejit_flex_variant_init.restype = None
        lib.tilejit_flex_attention_forward.argtypes = ([vp] * 5 + [ci] * 7 + [i64p] * 4 +
                                                       [cf, ctypes.POINTER(FlexVariant), vp])
        lib.tilejit_flex_clear_cache.argtypes = []
        self.has_backward = hasattr(lib, "tilejit_flex_attention_backward")
        if self.has_backward:
            lib.tilejit_flex_attention_backward.argtypes = ([vp] * 9 + [ci] * 7 + [i64p] * 4 +
                                                            [cf, ctypes.POINTER(FlexVariant), vp])
        lib.tilejit_matmul.argtypes = [vp, vp, vp, ci, ci, ci, ci, vp]
        lib.tilejit_last_compile_stats.argtypes = [ctypes.POINTER(CompileStats)]
        lib.tilejit_last_error.restype = ctypes.c_char_p
        lib.tilejit_version.restype = ctypes.c_char_p
        self.has_launch_config = hasattr(lib, "tilejit_last_launch_config")
        if self.has_launch_config:
            lib.tilejit_last_launch_config.argtypes = [ctypes.POINTER(LaunchConfig)]
        self.has_decode = hasattr(lib, "tilejit_decode_plan_create")
        if self.has_decode:
            kvp = ctypes.POINTER(PagedKV)
            lib.tilejit_paged_kv_append.argtypes = [kvp, vp, vp, vp, ci, vp]
            lib.tilejit_decode_plan_create.argtypes = ([ctypes.POINTER(vp), kvp] + [ci] * 4 +
                                                       [ctypes.POINTER(FlexVariant), cf] + [ci] * 4)
            lib.tilejit_decode_plan_run.argtypes = [vp, vp, vp, vp, kvp, vp]
            lib.tilejit_decode_plan_info.argtypes = [vp, ctypes.POINTER(ci), ctypes.POINTER(ci), i64p]
            lib.tilejit_decode_plan_destroy.argtypes = [vp]

    def check(self, rc: int, what: str):
        if rc != 0:
            raise RuntimeError(f"{what} failed ({rc}): {self.lib.tilejit_last_error().decode()}")

    def version(self) -> str:
        return self.lib.tilejit_version().decode()

    def attention(self, q, k, v, out, causal: bool, autotune: bool = True):
        """q, k, v, out: [batch, heads, seqlen, head_dim] bf16."""
        b, h, sq, d = q.shape
        self.check(self.lib.tilejit_attention_forward(
            q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), None, 0, b, h, sq, k.shape[2], d,
            _strides(q), _strides(k), _strides(v), _strides(out), int(causal), 0.0, int(autotune), _stream()),
            "tilejit_attention_forward")

    def variant(self, **fields) -> FlexVariant:
        """A flex variant: everything off (tilejit_flex_variant_init), then `fields`; autotuned by default."""
        var = FlexVariant()
        self.lib.tilejit_flex_variant_init(ctypes.byref(var))
        var.autotune = 1
        for key, value in fields.items():
            setattr(var, key, value)
        return var

    def flex(self, q, k, v, out, variant: FlexVariant, lse=None):
        b, hq, sq, d = q.shape
        self.check(self.lib.tilejit_flex_attention_forward(
            q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr() if lse is not None else None,
            0, b, hq, k.shape[1], sq, k.shape[2], d, _strides(q), _strides(k), _strides(v), _strides(out), 0.0,
            ctypes.byref(variant), _stream()), "tilejit_flex_attention_forward")

    def flex_backward(self, q, k, v, out, lse, dout, dq, dk, dv, variant: FlexVariant):
        """Gradients of flex(q, k, v, out, variant, lse): dq, dk, dv with q's, k's, v's strides; dout out's."""
        if not self.has_backward:
            raise Unavailable("this libtilejit has no tilejit_flex_attention_backward")
        b, hq, sq, d = q.shape
        self.check(self.lib.tilejit_flex_attention_backward(
            q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr(), dout.data_ptr(),
            dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), 0, b, hq, k.shape[1], sq, k.shape[2], d, _strides(q),
            _strides(k), _strides(v), _strides(out), 0.0, ctypes.byref(variant), _stream()),
            "tilejit_flex_attention_backward")

    def paged_kv_append(self, kv: PagedKV, k_new, v_new, slots):
        """k_new, v_new: contiguous [tokens, heads_kv, head_dim]; slots: i32 [tokens]."""
        self.check(self.lib.tilejit_paged_kv_append(ctypes.byref(kv), k_new.data_ptr(), v_new.data_ptr(),
                                                    slots.data_ptr(), slots.numel(), _stream()),
                   "tilejit_paged_kv_append")

    def decode_plan(self, kv: PagedKV, batch: int, heads_q: int, seqlen_q: int, max_seq_len: int,
                    variant: Optional[FlexVariant] = None, num_splits: int = 0) -> ctypes.c_void_p:
        """A tilejit_decode_plan (free it with decode_destroy)."""
        plan = ctypes.c_void_p()
        self.check(self.lib.tilejit_decode_plan_create(
            ctypes.byref(plan), ctypes.byref(kv), batch, heads_q, seqlen_q, max_seq_len,
            ctypes.byref(variant) if variant is not None else None, 0.0, num_splits, 0, 0, 0),
            "tilejit_decode_plan_create")
        return plan

    def decode_run(self, plan, q, out, lse, kv: PagedKV):
        """q, out: [batch, seqlen_q, heads_q, head_dim] bf16; lse [batch, seqlen_q, heads_q] f32 or None."""
        self.check(self.lib.tilejit_decode_plan_run(plan, q.data_ptr(), out.data_ptr(),
                                                    lse.data_ptr() if lse is not None else None, ctypes.byref(kv),
                                                    _stream()), "tilejit_decode_plan_run")

    def decode_info(self, plan) -> dict:
        splits, block_n, scratch = ctypes.c_int(), ctypes.c_int(), ctypes.c_int64()
        self.check(self.lib.tilejit_decode_plan_info(plan, ctypes.byref(splits), ctypes.byref(block_n),
                                                     ctypes.byref(scratch)), "tilejit_decode_plan_info")
        return dict(num_splits=splits.value, block_n=block_n.value, scratch_bytes=scratch.value)

    def decode_destroy(self, plan):
        self.check(self.lib.tilejit_decode_plan_destroy(plan), "tilejit_decode_plan_destroy")

    def clear_flex_cache(self):
        self.check(self.lib.tilejit_flex_clear_cache(), "tilejit_flex_clear_cache")

    def matmul(self, a, b, c):
        """c = a @ b, contiguous bf16."""
        self.check(self.lib.tilejit_matmul(a.data_ptr(), b.data_ptr(), c.data_ptr(), a.shape[0], b.shape[1],
                                           a.shape[1], 0, _stream()), "tilejit_matmul")

    def last_config(self) -> Optional[dict]:
        """tilejit_last_launch_config as a dict (None when the library predates it)."""
        if not self.has_launch_config:
            return None
        c = LaunchConfig()
        self.check(self.lib.tilejit_last_launch_config(ctypes.byref(c)), "tilejit_last_launch_config")
        return {name: (getattr(c, name).decode() if name == "kernel" else getattr(c, name)) for name, _ in c._fields_}

    def compile_stats(self) -> dict:
        s = CompileStats()
        self.check(self.lib.tilejit_last_compile_stats(ctypes.byref(s)), "tilejit_last_compile_stats")
        return dict(codegen_ms=s.codegen_ms, link_ms=s.link_ms, load_ms=s.load_ms, total_ms=s.total_ms,
                    source=s.source.decode())


def config_text(cfg: Optional[dict]) -> str:
    """'128x64, 8 warps, 2 stages, 2/SM, TMA' (2/SM: registers capped so two programs share an SM; TMA: operand
    tiles copied by TMA, 'TMA producer': by a producer warpgroup's TMA copies; nothing: every thread's cp.async)."""
    if not cfg or not cfg.get("kernel"):
        return "n/a"
    tiles = f"{cfg['block_m']}x{cfg['block_n']}" + (f"x{cfg['block_k']}" if cfg.get("block_k") else "")
    text = f"{tiles}, {cfg['num_warps']} warps, {cfg['num_stages']} stage{'s' if cfg['num_stages'] != 1 else ''}"
    if cfg.get("min_ctas_per_sm"):
        text += f", {cfg['min_ctas_per_sm']}/SM"
    text += {1: ", TMA", 2: ", TMA producer"}.get(cfg.get("copy_method", 0), "")
    return text


class UserModsParams(ctypes.Structure):
    """user_mods_params of examples/user_mods/user_mods.h."""
    _fields_ = [("alibi_slopes", ctypes.c_void_p), ("softcap", ctypes.c_float), ("window", ctypes.c_int),
                ("doc_ids", ctypes.c_void_p), ("prefix_len", ctypes.c_int), ("bias_table", ctypes.c_void_p),
                ("max_distance", ctypes.c_int)]


class UserMods:
    """The example library examples/user_mods (user-written C++ mods and the built-ins of the same math)."""

    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        self.lib = lib = ctypes.CDLL(self.path)
        vp, ci = ctypes.c_void_p, ctypes.c_int
        pp = ctypes.POINTER(UserModsParams)
        lib.user_mods_forward.argtypes = [ctypes.c_char_p, pp, ci] + [vp] * 5 + [ci] * 5 + [vp]
        lib.user_mods_build_block_mask.argtypes = ([ctypes.c_char_p, pp] + [ci] * 6 +
                                                   [vp, ctypes.POINTER(ctypes.c_int)])
        lib.user_mods_drop_block_masks.argtypes = []
        self.has_backward = hasattr(lib, "user_mods_backward")
        if self.has_backward:
            lib.user_mods_backward.argtypes = [ctypes.c_char_p, pp, ci] + [vp] * 9 + [ci] * 4 + [vp]
        lib.user_mods_last_error.restype = ctypes.c_char_p
        self.has_decode = hasattr(lib, "user_mods_decode_plan_create")
        if self.has_decode:
            kvp = ctypes.POINTER(PagedKV)
            lib.user_mods_decode_plan_create.argtypes = [ctypes.c_char_p, pp, kvp] + [ci] * 5 + [ctypes.POINTER(vp)]
            lib.user_mods_decode_plan_run.argtypes = [vp, vp, vp, vp, kvp, vp]
            lib.user_mods_decode_plan_destroy.argtypes = [vp]

    def _check(self, rc, what):
        if rc != 0:
            raise RuntimeError(f"{what} failed: {self.lib.user_mods_last_error().decode()}")

    def forward(self, mod: str, params: UserModsParams, q, k, v, out, lse, block_mask: int = 0,
                autotune: bool = True):
        b, h, s, d = q.shape
        self._check(self.lib.user_mods_forward(mod.encode(), ctypes.byref(params), block_mask, q.data_ptr(),
                                               k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr(), b, h, s,
                                               d, int(autotune), _stream()), f"user_mods_forward({mod})")

    def backward(self, mod: str, params: UserModsParams, q, k, v, out, lse, dout, dq, dk, dv, block_mask: int = 0):
        if not self.has_backward:
            raise Unavailable(f"{self.path} has no user_mods_backward")
        b, h, s, d = q.shape
        self._check(self.lib.user_mods_backward(mod.encode(), ctypes.byref(params), block_mask, q.data_ptr(),
                                                k.data_ptr(),
                                                v.data_ptr(), out.data_ptr(), lse.data_ptr(), dout.data_ptr(),
                                                dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), b, h, s, d, _stream()),
                    f"user_mods_backward({mod})")

    def build_block_mask(self, mod: str, params: UserModsParams, shape, block_m: int, block_n: int) -> int:
        """The handle of a block mask built once for this mod and shape (create_block_mask)."""
        b, h, s, d = shape
        handle = ctypes.c_int(0)
        self._check(self.lib.user_mods_build_block_mask(mod.encode(), ctypes.byref(params), b, h, s, d, block_m,
                                                        block_n, _stream(), ctypes.byref(handle)),
                    f"user_mods_build_block_mask({mod})")
        return handle.value

    def drop_block_masks(self):
        self._check(self.lib.user_mods_drop_block_masks(), "user_mods_drop_block_masks")

    def decode_plan(self, mod: str, params: UserModsParams, kv: PagedKV, batch: int, heads_q: int, seqlen_q: int,
                    max_seq_len: int, causal: bool) -> ctypes.c_void_p:
        """A user_mods_decode_plan (free it with decode_destroy); params and kv must outlive it."""
        if not self.has_decode:
            raise Unavailable(f"{self.path} has no decode entry (user_mods_decode_plan_create)")
        plan = ctypes.c_void_p()
        self._check(self.lib.user_mods_decode_plan_create(mod.encode(), ctypes.byref(params), ctypes.byref(kv), batch,
                                                          heads_q, seqlen_q, max_seq_len, int(causal),
                                                          ctypes.byref(plan)), f"user_mods_decode_plan_create({mod})")
        return plan

    def decode_run(self, plan, q, out, lse, kv: PagedKV):
        self._check(self.lib.user_mods_decode_plan_run(plan, q.data_ptr(), out.data_ptr(),
                                                       lse.data_ptr() if lse is not None else None, ctypes.byref(kv),
                                                       _stream()), "user_mods_decode_plan_run")

    def decode_destroy(self, plan):
        self._check(self.lib.user_mods_decode_plan_destroy(plan), "user_mods_decode_plan_destroy")


# ============================================================================================ context


class Unavailable(Exception):
    """A peer or part that cannot run here; the table shows n/a and the reason."""


class Context:
    """What a suite gets: the arguments, tilejit, the user-mods library, the time budget, the report."""

    def __init__(self, args, suite_name: str):
        self.args = args
        self.suite = suite_name
        self.started = time.monotonic()
        self.tj = Tilejit(args.lib)
        self._user_mods = None
        self._user_mods_error = None

    def time_left(self) -> float:
        return math.inf if not self.args.budget_s else self.args.budget_s - (time.monotonic() - self.started)

    def out_of_time(self, reserve_s: float = 0.0) -> bool:
        """True once the suite's soft budget (--budget-s) is spent, keeping `reserve_s` for the report."""
        return self.time_left() < reserve_s

    def user_mods(self) -> UserMods:
        if self._user_mods is None and self._user_mods_error is None:
            path = self.args.user_mods or default_user_mods_path(self.args.lib)
            try:
                if not path or not os.path.exists(path):
                    raise Unavailable(f"the user-mods example library was not found ({path or 'no path'}; build "
                                      "the target tilejit_user_mods, or pass --user-mods)")
                self._user_mods = UserMods(path)
            except Unavailable as ex:
                self._user_mods_error = str(ex)
            except OSError as ex:
                self._user_mods_error = f"could not load {path}: {ex}"
        if self._user_mods is None:
            raise Unavailable(self._user_mods_error)
        return self._user_mods

    def log(self, *parts):
        print(*parts, flush=True)


def default_user_mods_path(lib: str) -> Optional[str]:
    """libtilejit_user_mods.so beside the library (carry/), else in the build tree next to it."""
    here = os.path.dirname(os.path.abspath(lib))
    for cand in (os.path.join(here, "libtilejit_user_mods.so"),
                 os.path.join(here, "examples", "user_mods", "libtilejit_user_mods.so"),
                 os.path.join(REPO, "build", "examples", "user_mods", "libtilejit_user_mods.so")):
        if os.path.exists(cand):
            return cand
    return None


# ============================================================================================ timing


def _do_bench():
    try:
        from triton.testing import do_bench
        return do_bench
    except Exception:  # noqa: BLE001 (no triton, or a broken install)
        return None


def bench_ms(fn, warmup_ms: int = 25, rep_ms: int = 100) -> float:
    """Median time of one call of fn, ms: triton.testing.do_bench (which flushes L2 between calls) when
    available, else CUDA events around single calls (median of 30 after 5 warm-ups)."""
    import torch
    if DEVICE != "cuda":  # --smoke: wall time of a few calls
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)
    do_bench = _do_bench()
    if do_bench is not None:
        try:
            return float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))
        except TypeError:  # older triton: quantiles instead of return_mode
            return float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=[0.5]))
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(30):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def timing_method() -> str:
    if DEVICE != "cuda":
        return "smoke test: wall time of single calls on the CPU interpreter (meaningless as speed)"
    if _do_bench() is not None:
        return ("triton.testing.do_bench: median over about 100 ms of calls after 25 ms of warm-up, L2 flushed "
                "between calls")
    return "CUDA events around single calls: median of 30 after 5 warm-ups (triton not installed)"


def interleaved_ratio(fn, base, rounds: int):
    """fn's time over base's, timed back to back `rounds` times, which of the two goes first alternating
    (the GPU's clock drifts over tens of seconds: rows timed far apart bias a ratio by several percent).
    Returns (median, min, max) of the per-round ratios."""
    ratios = []
    for r in range(rounds):
        if r % 2 == 0:
            a = bench_ms(fn, 10, 40)
            b = bench_ms(base, 10, 40)
        else:
            b = bench_ms(base, 10, 40)
            a = bench_ms(fn, 10, 40)
        ratios.append(a / b)
    return statistics.median(ratios), min(ratios), max(ratios)


def first_call_s(fn) -> float:
    """Wall time of one call including compiling/tuning, synchronized."""
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


# ============================================================================================ checks


def rel_err(got, ref) -> float:
    """Relative Frobenius error ‖got − ref‖ / ‖ref‖ in float64 (inf when got has a non-finite value)."""
    import torch
    got, ref = got.double(), ref.double()
    if not torch.isfinite(got).all():
        return math.inf
    return math.sqrt(((got - ref) ** 2).sum().item() / max((ref ** 2).sum().item(), 1e-300))


def verdict(err: Optional[float]) -> str:
    if err is None:
        return "-"
    return f"{err:.1e} {'PASS' if err <= BOUND else 'FAIL'}"


def reference_attention(q, k, v, pairs, score_fn=None, visible_fn=None, rows_per_step: int = 2048):
    """fp32 attention for the (batch, head) `pairs` of q, k, v ([b, h, s, d]): [len(pairs), s, d].
    score_fn(scores, b, h, qi, ki) and visible_fn(b, h, qi, ki) get fp32 scores [r, s] and index tensors
    qi [r, 1], ki [1, s]. Computed in row chunks (at most rows_per_step × s scores at a time)."""
    import torch
    s, d = q.shape[2], q.shape[3]
    ki = torch.arange(s, device=q.device)[None, :]
    outs = []
    for b, h in pairs:
        qf, kf, vf = q[b, h].float(), k[b, h].float(), v[b, h].float()
        rows = []
        for r0 in range(0, s, rows_per_step):
            r1 = min(s, r0 + rows_per_step)
            qi = torch.arange(r0, r1, device=q.device)[:, None]
            sc = (qf[r0:r1] @ kf.T) / math.sqrt(d)
            if score_fn is not None:
                sc = score_fn(sc, b, h, qi, ki)
            if visible_fn is not None:
                sc = sc.masked_fill(~visible_fn(b, h, qi, ki), float("-inf"))
            rows.append(torch.softmax(sc, dim=-1) @ vf)
        outs.append(torch.cat(rows))
    return torch.stack(outs)


def grouped_errors(items: list[tuple[str, str, str]]) -> list[str]:
    """(where, who, message) triples as report lines, one per (who, message) with the places it happened."""
    groups: dict[tuple[str, str], list[str]] = {}
    for where, who, msg in items:
        groups.setdefault((who, msg), []).append(where)
    return [f"- {who} ({', '.join(places) if len(places) <= 3 else f'{len(places)} shapes: ' + ', '.join(places)}): "
            f"{msg}" for (who, msg), places in groups.items()]


def short_error(ex: BaseException) -> str:
    text = str(ex).strip().splitlines()
    return f"{type(ex).__name__}: {text[0][:200] if text else ''}"


# ============================================================================================ environment


def git_commit(lib_path: str) -> str:
    """The commit the library was built from: BUILD_INFO beside it (written by bench/device.sh --prepare into
    carry/, since the GPU machine has no git checkout), else this checkout's HEAD (and whether it has local
    changes)."""
    info = os.path.join(os.path.dirname(os.path.abspath(lib_path)), "BUILD_INFO")
    if os.path.exists(info):
        with open(info) as f:
            fields = dict(line.strip().split("=", 1) for line in f if "=" in line)
        return fields.get("commit", "unknown") + (" (built with uncommitted changes)"
                                                  if fields.get("dirty") == "yes" else "")
    try:
        sha = subprocess.run(["git", "-C", REPO, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                             timeout=10)
        if sha.returncode == 0 and sha.stdout.strip():
            dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=10).stdout.strip()
            return sha.stdout.strip() + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown (no BUILD_INFO beside the library and no git checkout)"


def nvidia_smi(query: str) -> str:
    try:
        r = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=30)
        return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def environment(ctx: Context) -> list[str]:
    import torch
    try:
        import triton
        triton_version = triton.__version__
    except Exception:  # noqa: BLE001
        triton_version = "not installed"
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else "unavailable"
    gpu = (f"{torch.cuda.get_device_name()} (max SM clock {nvidia_smi('clocks.max.sm')}), driver "
           f"{nvidia_smi('driver_version')}" if DEVICE == "cuda" else
           "none: SMOKE TEST on the CPU interpreter (TILEJIT_INTERPRET=1), tiny shapes; the numbers mean nothing")
    return [
        f"- date: {time.strftime('%Y-%m-%d %H:%M %Z')}",
        f"- tilejit {ctx.tj.version()}, commit {git_commit(ctx.args.lib)} ({ctx.args.lib})",
        f"- GPU: {gpu}",
        f"- torch {torch.__version__} (CUDA {torch.version.cuda}), cuDNN {cudnn}, triton {triton_version}, "
        f"Python {sys.version.split()[0]}",
        f"- command: `{' '.join(['bench/bench.py'] + sys.argv[1:])}`",
    ]


# ============================================================================================ report


def md_table(headers: list[str], rows: list[list], right: Optional[set[int]] = None) -> list[str]:
    """A markdown table; `right`: indices of right-aligned (numeric) columns (default: all but the first)."""
    right = set(range(1, len(headers))) if right is None else right
    out = ["| " + " | ".join(headers) + " |",
           "|" + "|".join("---:" if i in right else "---" for i in range(len(headers))) + "|"]
    for row in rows:
        out.append("| " + " | ".join(str(c) for c in row) + " |")
    return out


def num(x, fmt: str, missing: str = "n/a") -> str:
    return missing if x is None else format(x, fmt)


class Report:
    """<results>/<suite>.md: title, environment, sections; written by write()."""

    def __init__(self, ctx: Context, title: str):
        self.ctx = ctx
        self.lines = [f"# {title}", ""] + environment(ctx) + [""]
        os.makedirs(ctx.args.results, exist_ok=True)

    def section(self, title: str, *lines: str):
        self.lines += [f"## {title}", ""] + list(lines) + [""]

    def add(self, *lines: str):
        self.lines += list(lines)

    def path(self, ext: str) -> str:
        return os.path.join(self.ctx.args.results, f"{self.ctx.suite}.{ext}")

    def write(self):
        os.makedirs(self.ctx.args.results, exist_ok=True)
        with open(self.path("md"), "w") as f:
            f.write("\n".join(self.lines).rstrip() + "\n")
        self.ctx.log(f"# wrote {self.path('md')}")


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt, None
    except Exception as ex:  # noqa: BLE001
        return None, f"no plot: matplotlib unavailable ({short_error(ex)})"


def plot_lines(path: str, panels: list, title: str, ylabel: str, xlabel: str = "seqlen") -> Optional[str]:
    """One panel per (panel title, {series label: [(x, y), ...]}); x on a log2 axis. Returns a note when
    nothing was drawn."""
    try:
        return _plot_lines(path, panels, title, ylabel, xlabel)
    except Exception as ex:  # noqa: BLE001 (a plot must not lose the table)
        return f"no plot: {short_error(ex)}"


def _plot_lines(path, panels, title, ylabel, xlabel):
    plt, why = _pyplot()
    if plt is None:
        return why
    panels = [p for p in panels if any(p[1].values())]
    if not panels:
        return "no plot: no data"
    cols = 2 if len(panels) == 4 else min(len(panels), 4)
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    for ax, (name, series) in zip(axes.flat, panels):
        for label, points in series.items():
            points = sorted(p for p in points if p[1] is not None)
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
        ax.set_xscale("log", base=2)
        xs = sorted({p[0] for points in series.values() for p in points if p[1] is not None})
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{x // 1024}k" if x >= 1024 and x % 1024 == 0 else str(x) for x in xs])
        ax.minorticks_off()
        ax.set_ylim(bottom=0)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def plot_bars(path: str, categories: list[str], series: dict, title: str, ylabel: str,
              log: bool = False) -> Optional[str]:
    """Grouped bars: one group per category, one bar per series ({label: [value or None per category]})."""
    return plot_bar_panels(path, [("", categories, series)], title, ylabel, log)


def plot_bar_panels(path: str, panels: list, title: str, ylabel: str, log: bool = False) -> Optional[str]:
    """Grouped bars in panels stacked vertically, one per (panel title, categories, series) as in plot_bars."""
    try:
        return _plot_bar_panels(path, panels, title, ylabel, log)
    except Exception as ex:  # noqa: BLE001
        return f"no plot: {short_error(ex)}"


def _plot_bar_panels(path, panels, title, ylabel, log):
    plt, why = _pyplot()
    if plt is None:
        return why
    panels = [p for p in panels if p[1] and any(v is not None for vals in p[2].values() for v in vals)]
    if not panels:
        return "no plot: no data"
    # A series without values is left out of its panel; a label keeps its colour across panels.
    panels = [(name, cats, {k: v for k, v in series.items() if any(x is not None for x in v)})
              for name, cats, series in panels]
    colours = {}
    for _, _, series in panels:
        for label in series:
            colours.setdefault(label, f"C{len(colours) % 10}")
    width_in = max(6.0, max(0.45 * len(cats) * max(1, len(series)) + 2 for _, cats, series in panels))
    fig, axes = plt.subplots(len(panels), 1, figsize=(width_in, 4.2 * len(panels)), squeeze=False)
    for ax, (name, categories, series) in zip(axes.flat, panels):
        width = 0.8 / max(1, len(series))
        for i, (label, values) in enumerate(series.items()):
            xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(categories))]
            ax.bar([x for x, v in zip(xs, values) if v is not None], [v for v in values if v is not None], width,
                   label=label, color=colours[label])
        ax.set_xticks(range(len(categories)))
        ax.set_xticklabels(categories, rotation=20, ha="right", fontsize=8)
        if log:
            ax.set_yscale("log")
        ax.set_ylabel(ylabel)
        ax.set_title(name or title, fontsize=10 if name else None)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    if len(panels) > 1 or panels[0][0]:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def common_method_notes() -> list[str]:
    return [f"- Timing: {timing_method()}. Every implementation runs once before it is timed (compiling, "
            "tuning, building block masks), all on the same tensors in one process, on PyTorch's current stream.",
            f"- Checks: relative Frobenius error ‖out − ref‖/‖ref‖ against an fp32 reference on fresh random "
            f"inputs (torch.randn, seed 0), tilejit's output poisoned with NaN before the checked call; PASS when "
            f"≤ {BOUND:g} (bf16 output; its rounding alone gives about 2e-3).",
            "- Ratios tilejit/X = X ms / tilejit ms: above 1, tilejit is faster."]


# ============================================================================================ protocol


PROTOCOL_SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]
PROTOCOL_TOKENS, PROTOCOL_HIDDEN = 16384, 2048


def attention_peers():
    """{name: fn(q, k, v, causal) -> out} and {name: why unavailable}: SDPA's cuDNN and FlashAttention-2
    backends and FlexAttention (torch.compile'd; causal through a block mask built once per shape)."""
    import torch
    import torch.nn.functional as F
    peers, missing = {}, {}
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as ex:
        return {}, {"cuDNN": short_error(ex), "FA2": short_error(ex), "Flex": short_error(ex)}

    def sdpa(backend):
        def run(q, k, v, causal):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return run
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        peers["cuDNN"] = sdpa(SDPBackend.CUDNN_ATTENTION)
    else:
        missing["cuDNN"] = f"this torch ({torch.__version__}) has no SDPA cuDNN backend"
    peers["FA2"] = sdpa(SDPBackend.FLASH_ATTENTION)
    try:
        flex, create_block_mask = compiled_flex()
        masks = {}

        def run_flex(q, k, v, causal):
            if not causal:
                return flex(q, k, v)
            s = q.shape[2]
            if s not in masks:
                masks[s] = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, s, s, device=q.device)
            return flex(q, k, v, block_mask=masks[s])
        peers["Flex"] = run_flex
    except Exception as ex:  # noqa: BLE001
        missing["Flex"] = short_error(ex)
    return peers, missing


def compiled_flex():
    """torch.compile(flex_attention) (one compile per shape and mod; never falling back to eager) and
    create_block_mask."""
    import torch
    import torch._dynamo
    if DEVICE != "cuda":  # --smoke: eager (compiling for the CPU would dominate the check)
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        return flex_attention, create_block_mask
    for knob in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 512)
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    return torch.compile(flex_attention, dynamic=False), create_block_mask


def run_protocol_shapes(ctx: Context, row_of) -> tuple[list, list]:
    """row_of(shape, name) for each protocol shape (head dims × causal × seqlens) while the budget lasts:
    (rows, names of the shapes skipped)."""
    args = ctx.args
    rows, skipped = [], []
    for d in args.head_dims:
        for c in (False, True):
            for s in args.seqlens or PROTOCOL_SEQLENS:
                sh = dict(batch=PROTOCOL_TOKENS // s, heads=PROTOCOL_HIDDEN // d, seqlen=s, head_dim=d, causal=c)
                name = f"d{d} s{s} b{sh['batch']} h{sh['heads']}" + (" causal" if c else "")
                if ctx.out_of_time(reserve_s=20):
                    skipped.append(name)
                    continue
                rows.append(row_of(sh, name))
                empty_cache()
    return rows, skipped


@suite("protocol", "attention forward on the FlashAttention papers' protocol: tilejit (autotuned) beside SDPA "
       "cuDNN, SDPA FlashAttention-2 and FlexAttention; bf16, d 64/128, seqlen 512-16384, causal and not")
def run_protocol(ctx: Context):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False  # a true fp32 reference
    peers, missing = attention_peers()
    impls = ["tilejit"] + [p for p in ("cuDNN", "FA2", "Flex") if p in peers or p in missing]
    rows, skipped = run_protocol_shapes(ctx, lambda sh, name: protocol_row(ctx, sh, name, peers, missing))

    notes = common_method_notes() + [
        f"- Shapes: batch·seqlen = {PROTOCOL_TOKENS} tokens, hidden {PROTOCOL_HIDDEN} (heads = "
        f"{PROTOCOL_HIDDEN}/head_dim), layout [batch, heads, seqlen, head_dim], bf16, softmax scale 1/sqrt(d).",
        "- The fp32 reference (softmax(q·kᵀ/sqrt(d))·v in fp32, causal mask as -inf) covers the first 64 "
        "(batch, head) pairs for seqlen ≤ 2048, the first 8 above; every implementation is checked against it.",
        "- tilejit: tilejit_attention_forward with autotune = 1; its first call for a shape bucket tunes "
        "(compiles every candidate config in parallel and times them; winners cached on disk). 'tilejit config' "
        "is the autotuner's pick (tilejit_last_launch_config): BLOCK_M x BLOCK_N, warps, pipeline stages, and "
        "n/SM when registers are capped so n programs share an SM; TMA when the K/V tiles are copied by the Tensor "
        "Memory Accelerator (TMA producer: issued by a producer warpgroup), else by every thread's cp.async.",
        "- Peers: SDPA with sdpa_kernel(CUDNN_ATTENTION) and sdpa_kernel(FLASH_ATTENTION) (is_causal); "
        "FlexAttention = torch.compile(flex_attention, dynamic=False), no score_mod, causal through "
        "create_block_mask built once per shape outside the timing.",
    ]
    write_protocol_report(ctx, "Attention forward: the FlashAttention protocol", rows, impls, missing, skipped,
                          "TFLOP/s (FLOPs = 4·batch·heads·seqlen²·head_dim, halved when causal)",
                          "Checks: relative Frobenius error against fp32", "tilejit first call, s (tunes)", notes,
                          "Attention forward, bf16 (FlashAttention protocol)", config_column=True)


def write_protocol_report(ctx: Context, title: str, rows: list, impls: list, missing: dict, skipped: list,
                          flops_heading: str, checks_heading: str, first_call: str, notes: list, plot_title: str,
                          config_column: bool, extra: Optional[Callable] = None):
    """The protocol-shaped report shared by the forward and backward suites: a TFLOP/s table with ratios, a
    checks table, extra(rep)'s sections, method notes, errors and skipped shapes, and a plot per (head_dim,
    causal)."""
    args = ctx.args
    rep = Report(ctx, title)
    peers_here = impls[1:]
    headers = (["head_dim", "seqlen", "batch x heads", "causal", "tilejit ms", "tilejit TFLOP/s"] +
               [f"{p} TFLOP/s" for p in peers_here] + [f"tilejit/{p}" for p in peers_here] +
               (["tilejit config"] if config_column else []))
    table = []
    for r in rows:
        sh = r["shape"]
        cells = [sh["head_dim"], sh["seqlen"], f"{sh['batch']} x {sh['heads']}", "yes" if sh["causal"] else "no",
                 num(r["ms"].get("tilejit"), ".3f"), tflops_cell(r, "tilejit")]
        cells += [tflops_cell(r, p) for p in peers_here]
        cells += [ratio_cell(r, p) for p in peers_here]
        if config_column:
            cells.append(r.get("config", "n/a"))
        table.append(cells)
    rep.section(flops_heading, *md_table(headers, table,
                                         right=set(range(4, len(headers) - (1 if config_column else 0)))))
    checks = [[r["name"], r["checked"]] + [verdict(r["err"].get(i)) if i in r["err"] else
                                           ("err" if i in r["errors"] else "n/a") for i in impls] +
              [num(r.get("first_call_s"), ".2f")] for r in rows]
    rep.section(checks_heading, *md_table(["shape", "(batch, head) pairs checked"] + impls + [first_call], checks,
                                          right=set()))
    if extra:
        extra(rep)
    rep.section("Method", *(notes + [f"- {p}: n/a — {why}" for p, why in missing.items()]))
    errors = grouped_errors([(r["name"], impl, e) for r in rows for impl, e in r["errors"].items()])
    if errors or skipped:
        rep.section("Errors and skipped shapes", *errors,
                    *([f"- not run (time budget --budget-s {args.budget_s:g} s spent): {', '.join(skipped)}"]
                      if skipped else []))
    panels = []
    for d in args.head_dims:
        for c in (False, True):
            series = {impl: [(r["shape"]["seqlen"], r["tflops"].get(impl)) for r in rows
                             if r["shape"]["head_dim"] == d and r["shape"]["causal"] == c] for impl in impls}
            panels.append((f"d{d}{' causal' if c else ''}", series))
    note = plot_lines(rep.path("png"), panels, plot_title, "TFLOP/s")
    if note:
        rep.add(f"({note})")
    rep.write()


def tflops_cell(r: dict, impl: str) -> str:
    if impl in r["tflops"]:
        flag = "" if r["err"].get(impl, 0) <= BOUND else " (check FAILED)"
        return f"{r['tflops'][impl]:.1f}{flag}"
    return "err" if impl in r["errors"] else "n/a"


def ratio_cell(r: dict, peer: str) -> str:
    a, b = r["tflops"].get("tilejit"), r["tflops"].get(peer)
    return f"{a / b:.2f}x" if a and b else "-"


def protocol_row(ctx: Context, sh: dict, name: str, peers: dict, missing: dict) -> dict:
    import torch
    b, h, s, d, causal = sh["batch"], sh["heads"], sh["seqlen"], sh["head_dim"], sh["causal"]
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, h, s, d, device=DEVICE, dtype=torch.bfloat16) for _ in range(3))
    flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
    n_check = min(b * h, 64 if s <= 2048 else 8)
    pairs = [(i // h, i % h) for i in range(n_check)]
    row = dict(shape=sh, name=name, ms={}, tflops={}, err={}, errors={}, checked=n_check)
    ref = reference_attention(q, k, v, pairs, visible_fn=(lambda bb, hh, qi, ki: ki <= qi) if causal else None)

    def record(impl, fn, out_of):
        out = out_of()
        sync()
        row["err"][impl] = rel_err(torch.stack([out[bb, hh] for bb, hh in pairs]), ref)
        row["ms"][impl] = bench_ms(fn)
        row["tflops"][impl] = flops / (row["ms"][impl] * 1e-3) / 1e12

    out = torch.empty_like(q)
    tj_call = lambda: ctx.tj.attention(q, k, v, out, causal)  # noqa: E731
    try:
        row["first_call_s"] = first_call_s(tj_call)
        row["config"] = config_text(ctx.tj.last_config())

        def checked_tj():
            out.fill_(float("nan"))
            tj_call()
            return out
        record("tilejit", tj_call, checked_tj)
    except Exception as ex:  # noqa: BLE001
        row["errors"]["tilejit"] = short_error(ex)
    for impl, peer in peers.items():
        try:
            fn = lambda peer=peer: peer(q, k, v, causal)  # noqa: E731
            record(impl, fn, fn)  # the checked call is also its first (compile) call
        except Exception as ex:  # noqa: BLE001
            row["errors"][impl] = short_error(ex)
    cells = [f"{impl} {row['tflops'][impl]:.1f} ({verdict(row['err'][impl])})" if impl in row["tflops"]
             else f"{impl} {'err' if impl in row['errors'] else 'n/a'}" for impl in ["tilejit"] + list(peers)]
    ctx.log(f"{name:<28} " + ", ".join(cells) + f"; tilejit {row.get('config', 'n/a')}")
    for impl, e in row["errors"].items():
        ctx.log(f"    {impl}: {e}")
    del q, k, v, out, ref
    return row


# ============================================================================================ backward


def reference_gradients(q, k, v, dout, pairs, causal: bool):
    """fp32 autograd of softmax(q·kᵀ/sqrt(d))·v for the (batch, head) `pairs`: (dq, dk, dv), each
    [len(pairs), s, d]."""
    import torch
    s, d = q.shape[2], q.shape[3]
    grads = ([], [], [])
    for b, h in pairs:
        qf, kf, vf = (t[b, h].float().requires_grad_() for t in (q, k, v))
        sc = (qf @ kf.T) / math.sqrt(d)
        if causal:
            sc = sc.masked_fill(torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
        out = torch.softmax(sc, dim=-1) @ vf
        for acc, g in zip(grads, torch.autograd.grad(out, (qf, kf, vf), dout[b, h].float())):
            acc.append(g)
        del sc, out
    return tuple(torch.stack(g) for g in grads)


@suite("backward", "attention backward on the FlashAttention protocol: tilejit's flex_backward beside the "
       "backward of SDPA cuDNN, SDPA FlashAttention-2 and compiled FlexAttention; dq, dk, dv against fp32 autograd")
def run_backward(ctx: Context):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False  # a true fp32 reference
    peers, missing = attention_peers()  # their backward runs through autograd
    impls = ["tilejit", "tilejit atomics"] + [p for p in ("cuDNN", "FA2", "Flex") if p in peers or p in missing]
    rows, skipped = run_protocol_shapes(ctx, lambda sh, name: backward_row(ctx, sh, name, peers))
    mod_rows = backward_mods(ctx, skipped)

    notes = common_method_notes() + [
        f"- Shapes: batch·seqlen = {PROTOCOL_TOKENS} tokens, hidden {PROTOCOL_HIDDEN} (heads = "
        f"{PROTOCOL_HIDDEN}/head_dim), layout [batch, heads, seqlen, head_dim], bf16, softmax scale 1/sqrt(d); "
        "dout from torch.randn.",
        "- Timed: the backward alone. tilejit: tilejit_flex_attention_backward on its own forward's out and lse "
        "(the forward untuned, the backward autotuned: its first call tunes, and 'tilejit config' is its pick, "
        "from tilejit_last_launch_config: the dK/dV kernel's BLOCK_M x BLOCK_N, which the dQ kernel runs swapped; "
        "the atomics column's own pick is not shown), dq in its own pass (bitwise reproducible); 'tilejit "
        "atomics': dq accumulated with f32 atomics by the dK/dV kernel (FlexOptions::atomics), tuned for that "
        "mode; peers: "
        "torch.autograd.grad of their forward's output (retain_graph), the forward run once outside the timing.",
        "- The fp32 reference (autograd of softmax(q·kᵀ/sqrt(d))·v in fp32) covers the first 8 (batch, head) "
        "pairs for seqlen ≤ 2048, the first 2 above; every implementation's dq, dk, dv are checked against it.",
    ]
    write_protocol_report(ctx, "Attention backward: the FlashAttention protocol", rows, impls, missing, skipped,
                          "TFLOP/s of the backward (FLOPs = 2.5 × the forward's 4·batch·heads·seqlen²·head_dim, "
                          "halved when causal)",
                          "Checks: the largest relative Frobenius error of dq, dk and dv against fp32 autograd",
                          "tilejit first call, s (tunes)", notes + backward_mods_notes(),
                          "Attention backward, bf16 (FlashAttention protocol)", config_column=True,
                          extra=lambda rep: backward_mods_section(rep, mod_rows))


# The mods table's backward: each mod as tilejit's built-in and as the user's lambda (examples/user_mods),
# beside FlexAttention's compiled backward with the same score_mod / mask_mod.
BACKWARD_MOD_SEQLEN = 4096
BACKWARD_MODS = {"alibi": "alibi", "softcap": "softcap", "rel. bias": "relbias", "document": "document",
                 "prefix-LM": "prefix_lm", "causal window": "window"}
BACKWARD_MASK_MODS = ("document", "prefix-LM", "causal window")  # mask functions, but builtin:window is a band
BACKWARD_BLOCK = 64  # FlexOptions' default block_m and block_n, the backward's tiles


def backward_mods(ctx: Context, skipped: list) -> list:
    """One row per (mod, tilejit implementation) at BACKWARD_MOD_SEQLEN: ms, TFLOP/s over attended pairs,
    FlexAttention's, and the gradients' difference from FlexAttention's."""
    import torch
    try:
        um = ctx.user_mods()
    except Exception as ex:  # noqa: BLE001
        return [dict(mod="all", impl="-", errors=[short_error(ex)])]
    try:
        flex, create_block_mask, flex_missing = *compiled_flex(), None
    except Exception as ex:  # noqa: BLE001
        flex, create_block_mask, flex_missing = None, None, short_error(ex)
    mi = ModInputs(BACKWARD_MOD_SEQLEN)
    torch.manual_seed(1)
    dout = torch.randn_like(mi.q)
    rows = []
    for mod, user in BACKWARD_MODS.items():
        if ctx.out_of_time(reserve_s=20):
            skipped.append(f"backward {mod}")
            continue
        flops = 2.5 * 4.0 * mi.b * mi.h * mi.pairs(mod) * mi.d
        fx = dict(errors=[])
        try:  # FlexAttention: block mask once, its compiled forward once, the timed backward through autograd
            if flex is None:
                raise Unavailable(flex_missing)
            score_mod, mask_mod, per_batch = mi.flex_mods(mod)
            block_mask = (create_block_mask(mask_mod, mi.b if per_batch else None, None, mi.s, mi.s, device=DEVICE)
                          if mask_mod is not None else None)
            qg, kg, vg = (t.detach().clone().requires_grad_() for t in (mi.q, mi.k, mi.v))
            out_f = flex(qg, kg, vg, score_mod=score_mod, block_mask=block_mask)
            timed = lambda: torch.autograd.grad(out_f, (qg, kg, vg), dout, retain_graph=True)  # noqa: E731
            fx["grads"] = timed()
            sync()
            fx["ms"] = bench_ms(timed)
        except Exception as ex:  # noqa: BLE001
            fx["errors"].append(f"Flex: {short_error(ex)}")
        for impl, name in (("built-in", "builtin:" + user), ("user lambda", user)):
            row = dict(mod=mod, impl=impl, errors=list(fx["errors"]), flex_ms=fx.get("ms"))
            try:
                um.forward(name, mi.params, mi.q, mi.k, mi.v, mi.out, mi.lse, autotune=False)
                grads = tuple(torch.empty_like(mi.q) for _ in range(3))
                # A mask function's block mask built once outside the timing, as FlexAttention's, at the
                # backward's default blocks (a band, as the built-in window, needs none).
                handle = (um.build_block_mask(name, mi.params, mi.q.shape, BACKWARD_BLOCK, BACKWARD_BLOCK)
                          if mod in BACKWARD_MASK_MODS and name != "builtin:window" else 0)
                call = lambda name=name, grads=grads, handle=handle: um.backward(  # noqa: E731
                    name, mi.params, mi.q, mi.k, mi.v, mi.out, mi.lse, dout, *grads, block_mask=handle)
                for g in grads:
                    g.fill_(float("nan"))
                row["first_call_s"] = first_call_s(call)
                if "grads" in fx:
                    row["vs_flex"] = max(rel_err(g, f) for g, f in zip(grads, fx["grads"]))
                row["ms"] = bench_ms(call)
            except Exception as ex:  # noqa: BLE001
                row["errors"].append(f"tilejit: {short_error(ex)}")
            for key in ("ms", "flex_ms"):
                if row.get(key):
                    row[key.replace("ms", "tflops")] = flops / (row[key] * 1e-3) / 1e12
            rows.append(row)
            ctx.log(f"backward {mod:<14} {impl:<12} " + (f"{row['tflops']:.1f} TFLOP/s" if row.get("tflops") else
                                                        "err") +
                    (f", Flex {row['flex_tflops']:.1f}" if row.get("flex_tflops") else "") +
                    (f", vs Flex {row['vs_flex']:.1e}" if row.get("vs_flex") is not None else ""))
    um.drop_block_masks()
    return rows


def backward_mods_section(rep: "Report", rows: list):
    headers = ["mod", "tilejit", "tilejit ms", "TFLOP/s", "Flex ms", "Flex TFLOP/s", "tilejit/Flex",
               "dq, dk, dv vs Flex", "first call, s"]
    table = []
    for r in rows:
        vs = r.get("vs_flex")
        table.append([r["mod"], r["impl"], num(r.get("ms"), ".3f"), num(r.get("tflops"), ".1f"),
                      num(r.get("flex_ms"), ".3f"), num(r.get("flex_tflops"), ".1f"),
                      f"{r['flex_ms'] / r['ms']:.2f}x" if r.get("flex_ms") and r.get("ms") else "-",
                      "-" if vs is None else f"{vs:.1e} {'PASS' if vs <= BOUND else 'FAIL'}",
                      num(r.get("first_call_s"), ".2f")])
    rep.section(f"The mods table's backward: b{MODS_TOKENS // BACKWARD_MOD_SEQLEN} h{MODS_HEADS} "
                f"s{BACKWARD_MOD_SEQLEN} d{MODS_DIM}, TFLOP/s over attended pairs",
                *md_table(headers, table, right={2, 3, 4, 5, 6, 8}))
    errors = [f"- {r['mod']} ({r['impl']}): {e}" for r in rows for e in r["errors"]]
    if errors:
        rep.section("Errors of the mods table", *errors)


def backward_mods_notes() -> list:
    return [
        "- The mods table's backward (" + "; ".join(f"{m}: {mod_math()[m]}" for m in BACKWARD_MODS) + "): "
        "tilejit through the user-mods example library (user_mods_backward = attention::flex_backward; "
        "'built-in' is flex_variants.h, 'user lambda' the same math as a C++ lambda, its derivative traced by "
        "vjp), library default blocks, on its own forward's out and lse; FlexAttention: autograd of "
        "torch.compile(flex_attention) with the same score_mod / mask_mod and a block mask built once. FLOPs = "
        "2.5 × 4·batch·heads·pairs·head_dim over the attended pairs. 'vs Flex': the largest relative Frobenius "
        "difference of tilejit's dq, dk, dv from FlexAttention's (both bf16). Block masks of mask functions "
        "(document, prefix-LM, the window's lambda) are built once outside the timing for both, as "
        "create_block_mask (tilejit: user_mods_build_block_mask at 64x64, the backward's default blocks, whose "
        "dK/dV pass then transposes it in every call); the built-in window is a band and needs none.",
    ]


def backward_row(ctx: Context, sh: dict, name: str, peers: dict) -> dict:
    import torch
    b, h, s, d, causal = sh["batch"], sh["heads"], sh["seqlen"], sh["head_dim"], sh["causal"]
    torch.manual_seed(0)
    q, k, v, dout = (torch.randn(b, h, s, d, device=DEVICE, dtype=torch.bfloat16) for _ in range(4))
    flops = 2.5 * 4.0 * b * h * s * s * d / (2 if causal else 1)
    n_check = min(b * h, 8 if s <= 2048 else 2)
    pairs = [(i // h, i % h) for i in range(n_check)]
    row = dict(shape=sh, name=name, ms={}, tflops={}, err={}, errors={}, checked=n_check)
    ref = reference_gradients(q, k, v, dout, pairs, causal)

    def record(impl, timed, grads_of):
        grads = grads_of()
        sync()
        row["err"][impl] = max(rel_err(torch.stack([g[bb, hh] for bb, hh in pairs]), r)
                               for g, r in zip(grads, ref))
        row["ms"][impl] = bench_ms(timed)
        row["tflops"][impl] = flops / (row["ms"][impl] * 1e-3) / 1e12

    try:
        tj = ctx.tj
        var = tj.variant(causal=int(causal), autotune=0)
        out = torch.empty_like(q)
        lse = torch.empty(b, h, s, device=DEVICE, dtype=torch.float32)
        tj.flex(q, k, v, out, var, lse)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

        def record_tj(impl, variant):
            call = lambda: tj.flex_backward(q, k, v, out, lse, dout, dq, dk, dv, variant)  # noqa: E731

            def checked():
                for g in (dq, dk, dv):
                    g.fill_(float("nan"))
                call()
                return dq, dk, dv
            if impl == "tilejit":
                row["first_call_s"] = first_call_s(call)  # tunes (the backward's autotuner), or finds its pick
                row["config"] = config_text(tj.last_config())
            record(impl, call, checked)
        record_tj("tilejit", tj.variant(causal=int(causal)))
        # dq accumulated with atomics by the dK/dV kernel, on the same forward, tuned for that mode.
        record_tj("tilejit atomics", tj.variant(causal=int(causal), atomics=1))
    except Exception as ex:  # noqa: BLE001
        row["errors"]["tilejit"] = short_error(ex)
    for impl, peer in peers.items():
        try:
            qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
            out_p = peer(qg, kg, vg, causal)
            timed = lambda out_p=out_p, qg=qg, kg=kg, vg=vg: torch.autograd.grad(  # noqa: E731
                out_p, (qg, kg, vg), dout, retain_graph=True)
            record(impl, timed, timed)  # the checked call is also its first (compile) call
            del out_p, qg, kg, vg
        except Exception as ex:  # noqa: BLE001
            row["errors"][impl] = short_error(ex)
    cells = [f"{impl} {row['tflops'][impl]:.1f} ({verdict(row['err'][impl])})" if impl in row["tflops"]
             else f"{impl} {'err' if impl in row['errors'] else 'n/a'}" for impl in ["tilejit"] + list(peers)]
    ctx.log(f"{name:<28} " + ", ".join(cells) + f"; tilejit {row.get('config', 'n/a')}")
    for impl, e in row["errors"].items():
        ctx.log(f"    {impl}: {e}")
    del q, k, v, dout, ref
    return row


# ============================================================================================ mods


MODS_HEADS, MODS_DIM, MODS_TOKENS = 16, 128, 16384
MODS_SEQLENS = [1024, 4096, 16384]
WINDOW, SOFTCAP, DOCUMENTS, MAX_DISTANCE = 256, 50.0, 4, 64
WINDOW_SEQLEN = 4096  # the sliding window's rows: b4 h16 s4096 d128


@dataclasses.dataclass
class ModRow:
    """One tilejit way of computing a mod. `mod` names the math (and FlexAttention's version of it)."""
    mod: str
    impl: str                                    # the table's description
    cabi: Optional[Callable] = None              # inputs -> tilejit_flex_variant fields (tilejit's C ABI)
    user: Optional[str] = None                   # or a mod of the user-mods example library
    block_mask_from: Optional[str] = None        # user mods: a block mask built once, at the block sizes the
                                                 # autotuner picked for this C ABI row's mod at the same seqlen
    window_shape_only: bool = False              # only at WINDOW_SEQLEN


MOD_ROWS = [
    ModRow("none", "built-in, no mod (C ABI)", cabi=lambda mi: {}),
    ModRow("causal", "built-in (C ABI)", cabi=lambda mi: dict(causal=1)),
    ModRow("alibi", "built-in (C ABI)", cabi=lambda mi: dict(alibi=1)),
    ModRow("alibi", "user lambda", user="alibi"),
    ModRow("softcap", "built-in (C ABI)", cabi=lambda mi: dict(softcap=SOFTCAP)),
    ModRow("softcap", "user lambda", user="softcap"),
    ModRow("document", "built-in (C ABI), block mask once", cabi=lambda mi: dict(doc_ids=mi.docs.data_ptr(),
                                                                                 reuse_block_mask=1)),
    ModRow("document", "user lambda, block mask once", user="document", block_mask_from="document"),
    ModRow("prefix-LM", "built-in (C++ API), block mask once", user="builtin:prefix_lm", block_mask_from="causal"),
    ModRow("prefix-LM", "user lambda, block mask once", user="prefix_lm", block_mask_from="causal"),
    ModRow("rel. bias", "built-in (C++ API)", user="builtin:relbias"),
    ModRow("rel. bias", "user lambda", user="relbias"),
    ModRow("causal window", "built-in band (C ABI)", cabi=lambda mi: dict(causal=1, window_left=WINDOW),
           window_shape_only=True),
    ModRow("causal window", "user lambda, automatic block mask", user="window", window_shape_only=True),
    ModRow("causal window", "user lambda, block mask once", user="window", block_mask_from="causal window",
           window_shape_only=True),
]

def mod_math() -> dict:
    """What each mod computes (for the report)."""
    return {
        "none": "no mod",
        "causal": "keys j ≤ i",
        "alibi": f"score − slope[h]·|i − j|, the ALiBi paper's slopes for {MODS_HEADS} heads",
        "softcap": f"{SOFTCAP:g}·tanh(score/{SOFTCAP:g})",
        "document": f"{DOCUMENTS} equal documents per sequence; keys of the query's document",
        "prefix-LM": "keys j ≤ i or j < prefix, prefix = seqlen/4",
        "rel. bias": f"score + table[h, clamp(j − i, −{MAX_DISTANCE}, {MAX_DISTANCE}) + {MAX_DISTANCE}], a random "
                     "fp32 table",
        "causal window": f"keys i − {WINDOW} ≤ j ≤ i",
    }


def alibi_slopes(heads: int) -> list[float]:
    """The ALiBi paper's slopes (as tilejit's attention::alibi_slopes): 2^(-8(i+1)/n) for the largest power
    of two n ≤ heads, then the even-indexed slopes of the 2n sequence for the remaining heads."""
    def pow2(n):
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]
    n = 1 << (heads.bit_length() - 1)
    return pow2(n) + pow2(2 * n)[0::2][: heads - n]


class ModInputs:
    """One seqlen's tensors and the mods' data, shared by tilejit, the user mods and FlexAttention."""

    def __init__(self, s: int):
        import torch
        self.b, self.h, self.s, self.d = MODS_TOKENS // s, MODS_HEADS, s, MODS_DIM
        torch.manual_seed(0)
        shape = (self.b, self.h, s, self.d)
        self.q, self.k, self.v = (torch.randn(*shape, device=DEVICE, dtype=torch.bfloat16) for _ in range(3))
        self.out = torch.empty_like(self.q)
        self.lse = torch.empty(self.b, self.h, s, device=DEVICE, dtype=torch.float32)
        self.slopes = torch.tensor(alibi_slopes(self.h), device=DEVICE, dtype=torch.float32)
        per_doc = s // DOCUMENTS
        ids = (torch.arange(s, device=DEVICE, dtype=torch.int32) // per_doc).clamp(max=DOCUMENTS - 1)
        self.docs = ids.expand(self.b, s).contiguous()
        self.prefix = s // 4
        self.table = torch.randn(self.h, 2 * MAX_DISTANCE + 1, device=DEVICE, dtype=torch.float32) * 0.5
        self.params = UserModsParams(alibi_slopes=self.slopes.data_ptr(), softcap=SOFTCAP, window=WINDOW,
                                     doc_ids=self.docs.data_ptr(), prefix_len=self.prefix,
                                     bias_table=self.table.data_ptr(), max_distance=MAX_DISTANCE)

    def pairs(self, mod: str) -> int:
        """Exact number of attended (query, key) pairs of one sequence."""
        s = self.s
        if mod in ("none", "alibi", "softcap", "rel. bias"):
            return s * s
        if mod == "causal":
            return s * (s + 1) // 2
        if mod == "causal window":  # query i sees min(i, W) + 1 keys
            w = min(WINDOW, s - 1)
            return w * (w + 1) // 2 + (w + 1) * (s - w)
        if mod == "document":
            counts = self.docs[0].long().bincount().tolist()
            return sum(n * n for n in counts)
        if mod == "prefix-LM":  # queries i < P see the P prefix keys; the others i + 1 keys
            p = min(self.prefix, s)
            return p * p + (s * (s + 1) // 2 - p * (p + 1) // 2)
        raise ValueError(mod)

    def score_and_mask(self, mod: str):
        """(score_fn, visible_fn) in the form of reference_attention (fp32 math)."""
        if mod == "alibi":
            return (lambda sc, b, h, qi, ki: sc - self.slopes[h] * (qi - ki).abs().float()), None
        if mod == "softcap":
            return (lambda sc, b, h, qi, ki: SOFTCAP * (sc / SOFTCAP).tanh()), None
        if mod == "rel. bias":
            return (lambda sc, b, h, qi, ki:
                    sc + self.table[h][(ki - qi).clamp(-MAX_DISTANCE, MAX_DISTANCE) + MAX_DISTANCE]), None
        if mod == "causal":
            return None, lambda b, h, qi, ki: ki <= qi
        if mod == "causal window":
            return None, lambda b, h, qi, ki: (ki <= qi) & (qi - ki <= WINDOW)
        if mod == "document":
            return None, lambda b, h, qi, ki: self.docs[b][qi] == self.docs[b][ki]
        if mod == "prefix-LM":
            return None, lambda b, h, qi, ki: (ki <= qi) | (ki < self.prefix)
        return None, None

    def flex_mods(self, mod: str):
        """(score_mod, mask_mod, mask per batch?) of FlexAttention."""
        slopes, docs, table, prefix = self.slopes, self.docs, self.table, self.prefix
        if mod == "alibi":
            return (lambda score, b, h, qi, ki: score - slopes[h] * (qi - ki).abs()), None, False
        if mod == "softcap":
            return (lambda score, b, h, qi, ki: SOFTCAP * (score / SOFTCAP).tanh()), None, False
        if mod == "rel. bias":
            return (lambda score, b, h, qi, ki:
                    score + table[h, (ki - qi).clamp(-MAX_DISTANCE, MAX_DISTANCE) + MAX_DISTANCE]), None, False
        if mod == "causal":
            return None, (lambda b, h, qi, ki: qi >= ki), False
        if mod == "causal window":
            return None, (lambda b, h, qi, ki: (qi >= ki) & (qi - ki <= WINDOW)), False
        if mod == "document":
            return None, (lambda b, h, qi, ki: docs[b, qi] == docs[b, ki]), True
        if mod == "prefix-LM":
            return None, (lambda b, h, qi, ki: (ki <= qi) | (ki < prefix)), False
        return None, None, False


@suite("mods", "flex attention variants: each built-in and the same math as a user's C++ lambda "
       "(examples/user_mods) beside FlexAttention with the same mod; bf16, d128, 16 heads, seqlen 1k/4k/16k")
def run_mods(ctx: Context):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    args = ctx.args
    seqlens = args.seqlens or MODS_SEQLENS
    try:
        flex, create_block_mask = compiled_flex()
        flex_missing = None
    except Exception as ex:  # noqa: BLE001
        flex, create_block_mask, flex_missing = None, None, short_error(ex)
    rows, skipped = [], []
    for s in seqlens:
        if MODS_TOKENS % s:
            raise SystemExit(f"mods: seqlen {s} must divide {MODS_TOKENS}")
        mods_seqlen(ctx, s, flex, create_block_mask, flex_missing, rows, skipped)

    rep = Report(ctx, "Flex attention: built-in variants, user lambdas and FlexAttention")
    headers = ["seqlen", "mod", "tilejit", "check", "tilejit ms", "TFLOP/s", "Flex ms", "Flex TFLOP/s",
               "tilejit/Flex", "vs no mod", "per attended pair", "tilejit config"]
    table = []
    for r in rows:
        table.append([r["seqlen"], r["mod"], r["impl"], r.get("check", "err"), num(r.get("ms"), ".3f"),
                      num(r.get("tflops"), ".1f"), num(r.get("flex_ms"), ".3f"), num(r.get("flex_tflops"), ".1f"),
                      f"{r['flex_ms'] / r['ms']:.2f}x" if r.get("flex_ms") and r.get("ms") else "-",
                      r.get("overhead", "-"), num(r.get("per_pair"), ".2f", "-"), r.get("config", "n/a")])
    rep.section(f"bf16, head_dim {MODS_DIM}, {MODS_HEADS} heads, batch = {MODS_TOKENS}/seqlen; TFLOP/s over "
                "attended pairs", *md_table(headers, table, right={0, 4, 5, 6, 7, 8, 9, 10}))
    notes = common_method_notes() + [
        "- Mods: " + "; ".join(f"{m}: {t}" for m, t in mod_math().items()) + ".",
        f"- The causal window rows run at b{MODS_TOKENS // WINDOW_SEQLEN} h{MODS_HEADS} s{WINDOW_SEQLEN} "
        f"d{MODS_DIM} only.",
        "- FLOPs = 4·batch·heads·pairs·head_dim, where pairs counts the attended (query, key) pairs exactly: "
        "seqlen² without a mask, seqlen(seqlen+1)/2 causal, the window's, documents' and prefix-LM's own counts. "
        "TFLOP/s of masked rows are therefore rates of useful work.",
        "- tilejit: 'C ABI' rows call tilejit_flex_attention_forward with a built-in variant; the other rows "
        "call the example library examples/user_mods (tilejit's public C++ API: 'built-in (C++ API)' uses "
        "flex_variants.h, 'user lambda' the same math written as a C++ lambda over tiles). Every tilejit row is "
        "autotuned (its first call tunes). 'block mask once': the block mask is built before timing "
        "(user_mods_build_block_mask = create_block_mask; the C ABI's reuse_block_mask), at the block sizes "
        "the autotuner picked for a C ABI row of the same seqlen (document: the document row's; prefix-LM: the "
        "causal row's; causal window: the band's); the tuner then picks warps and stages. 'automatic block mask': "
        "flex_forward builds it itself, inside the timing: once for every batch and head (the window reads neither) "
        "and kept between calls while the mask, shape and captured window stay the same.",
        "- FlexAttention: torch.compile(flex_attention, dynamic=False) with the same score_mod / mask_mod; its "
        "block masks (create_block_mask) are built once per seqlen and mod, outside the timing. One "
        "FlexAttention measurement per mod and seqlen, repeated in each of that mod's rows.",
        f"- check: tilejit and FlexAttention against an fp32 reference with the same mod (batch 0, heads "
        f"0..{args.check_heads - 1}), and tilejit against FlexAttention (whole output); PASS when tilejit's two "
        f"are ≤ {BOUND:g}.",
        f"- vs no mod: this row's tilejit time over the no-mod row's (same seqlen, tilejit_flex_attention_forward "
        f"without a mod), timed back to back {args.rounds} times with which of the two goes first alternating: "
        "median (min–max). Timing rows tens of seconds apart instead biases such ratios by several percent (the "
        "GPU's clock drifts). per attended pair = that ratio / (pairs / seqlen²): 1.0 means the time scales "
        "with the attended area.",
        "- tilejit config: the autotuner's pick (tilejit_last_launch_config), for the C ABI rows; the C++ API "
        "does not report it (block-mask rows: the block sizes are the mask's).",
    ]
    if flex_missing:
        notes.append(f"- FlexAttention: n/a — {flex_missing}")
    rep.section("Method", *notes)
    errors = [f"- s={r['seqlen']} {r['mod']} ({r['impl']}): {e}" for r in rows for e in r["errors"]]
    if errors or skipped:
        rep.section("Errors and skipped rows", *errors,
                    *([f"- not run (time budget --budget-s {args.budget_s:g} s spent): {', '.join(skipped)}"]
                      if skipped else []))
    panels = []
    for mod in mod_math():
        series = {}
        for r in rows:
            if r["mod"] == mod:
                series.setdefault(f"tilejit {r['impl']}", []).append((r["seqlen"], r.get("tflops")))
        flex_points = {(r["seqlen"], r.get("flex_tflops")) for r in rows if r["mod"] == mod}
        series["FlexAttention"] = sorted(p for p in flex_points if p[1] is not None)
        panels.append((mod, series))
    note = plot_lines(rep.path("png"), panels, f"Flex attention mods, bf16 d{MODS_DIM} (TFLOP/s over attended pairs)",
                      "TFLOP/s")
    if note:
        rep.add(f"({note})")
    rep.write()


def mods_seqlen(ctx: Context, s: int, flex, create_block_mask, flex_missing, rows: list, skipped: list):
    """Every row of MOD_ROWS at seqlen s, then the interleaved overheads against the no-mod row."""
    import torch
    args = ctx.args
    mi = ModInputs(s)
    here = [r for r in MOD_ROWS if not r.window_shape_only or s == WINDOW_SEQLEN]
    flex_done: dict[str, dict] = {}   # mod -> FlexAttention's ms, output, errors
    refs: dict[str, object] = {}      # mod -> fp32 reference (batch 0, first heads)
    configs: dict[str, dict] = {}     # mod -> the C ABI row's tuned config
    calls: list[tuple] = []           # (row dict, tilejit call) for the interleaved overheads
    base_call = None
    check_pairs = [(0, h) for h in range(min(args.check_heads, mi.h))]
    for spec in here:
        label = f"s={s} {spec.mod} ({spec.impl})"
        if ctx.out_of_time(reserve_s=30 + 2 * args.rounds):
            skipped.append(label)
            continue
        row = dict(seqlen=s, mod=spec.mod, impl=spec.impl, errors=[])
        pairs = mi.pairs(spec.mod)
        flops = 4.0 * mi.b * mi.h * pairs * mi.d
        row["area"] = pairs / (s * s)
        if spec.mod not in refs:
            score_fn, visible_fn = mi.score_and_mask(spec.mod)
            refs[spec.mod] = reference_attention(mi.q, mi.k, mi.v, check_pairs, score_fn, visible_fn)
        ref = refs[spec.mod]
        got = None
        try:
            call = tilejit_mod_call(ctx, spec, mi, configs)
            first = first_call_s(call)
            mi.out.fill_(float("nan"))
            call()
            sync()
            got = mi.out.clone()
            if spec.cabi is not None:
                cfg = ctx.tj.last_config()
                configs[spec.mod] = cfg
                row["config"] = config_text(cfg)
            elif spec.block_mask_from:
                bm = configs.get(spec.block_mask_from)
                row["config"] = (f"block mask {bm['block_m']}x{bm['block_n']}" if bm else
                                 "block mask 128x64") + ", rest tuned (not reported)"
            else:
                row["config"] = "tuned (not reported)"
            row["ms"] = bench_ms(call)
            row["tflops"] = flops / (row["ms"] * 1e-3) / 1e12
            row["tj_err"] = rel_err(torch.stack([got[b, h] for b, h in check_pairs]), ref)
            if spec.mod == "none" and spec.cabi is not None:
                base_call = call
            else:
                calls.append((row, call))
            ctx.log(f"{label}: {row['ms']:.3f} ms, {row['tflops']:.1f} TFLOP/s, first call {first:.1f} s, "
                    f"{row['config']}")
        except Exception as ex:  # noqa: BLE001
            row["errors"].append(f"tilejit: {short_error(ex)}")
            ctx.log(f"{label}: tilejit {short_error(ex)}")
        fx = flex_done.get(spec.mod)
        if fx is None:
            fx = flex_done[spec.mod] = flex_mod_run(mi, spec.mod, flex, create_block_mask, flex_missing, ref,
                                                    check_pairs)
            if "ms" in fx:
                ctx.log(f"s={s} {spec.mod} FlexAttention: {fx['ms']:.3f} ms (first call {fx['first_s']:.1f} s)")
        if "ms" in fx:
            row["flex_ms"] = fx["ms"]
            row["flex_tflops"] = flops / (fx["ms"] * 1e-3) / 1e12
        row["errors"] += fx.get("errors", [])
        if got is not None and fx.get("out") is not None:
            row["vs_flex"] = rel_err(got, fx["out"])
        row["check"] = mod_check_cell(row, fx)
        rows.append(row)
        del got
    for row, call in calls:  # back-to-back against the no-mod kernel
        if base_call is None or ctx.out_of_time(reserve_s=20):
            break
        try:
            med, lo, hi = interleaved_ratio(call, base_call, args.rounds)
            row["overhead"] = f"{med:.3f} ({lo:.3f}–{hi:.3f})"
            row["per_pair"] = med / row["area"]
        except Exception as ex:  # noqa: BLE001
            row["errors"].append(f"interleaved timing: {short_error(ex)}")
    sync()
    try:  # cached block masks are keyed by pointers that the next seqlen's tensors may reuse
        ctx.tj.clear_flex_cache()
        if ctx._user_mods is not None:
            ctx._user_mods.drop_block_masks()
    except Exception as ex:  # noqa: BLE001
        ctx.log(f"clearing block masks: {short_error(ex)}")
    for fx in flex_done.values():
        fx.pop("out", None)
    del mi, refs
    empty_cache()


def tilejit_mod_call(ctx: Context, spec: ModRow, mi: ModInputs, configs: dict):
    """The tilejit call of one row (block masks built once here, before any timing)."""
    if spec.cabi is not None:
        variant = ctx.tj.variant(**spec.cabi(mi))
        return lambda: ctx.tj.flex(mi.q, mi.k, mi.v, mi.out, variant, mi.lse)
    um = ctx.user_mods()
    handle = 0  # none: a mask function gets its block mask built on every call
    if spec.block_mask_from:
        cfg = configs.get(spec.block_mask_from)
        bm, bn = (cfg["block_m"], cfg["block_n"]) if cfg else (128, 64)
        handle = um.build_block_mask(spec.user, mi.params, mi.q.shape, bm, bn)
    return lambda: um.forward(spec.user, mi.params, mi.q, mi.k, mi.v, mi.out, mi.lse, handle)


def flex_mod_run(mi: ModInputs, mod: str, flex, create_block_mask, flex_missing, ref, check_pairs) -> dict:
    """FlexAttention with this mod: block mask once, first (compile) call, check, timing."""
    import torch
    if flex is None:
        return dict(errors=[f"Flex: n/a — {flex_missing}"])
    try:
        score_mod, mask_mod, per_batch = mi.flex_mods(mod)
        block_mask = None
        if mask_mod is not None:
            block_mask = create_block_mask(mask_mod, mi.b if per_batch else None, None, mi.s, mi.s, device=DEVICE)
        call = lambda: flex(mi.q, mi.k, mi.v, score_mod=score_mod, block_mask=block_mask)  # noqa: E731
        t0 = time.perf_counter()
        out = call()
        sync()
        first = time.perf_counter() - t0
        err = rel_err(torch.stack([out[b, h] for b, h in check_pairs]), ref)
        return dict(ms=bench_ms(call), out=out, err=err, first_s=first)
    except Exception as ex:  # noqa: BLE001
        return dict(errors=[f"Flex: {short_error(ex)}"])


def mod_check_cell(row: dict, fx: dict) -> str:
    tj, vs = row.get("tj_err"), row.get("vs_flex")
    if tj is None:
        return "err"
    ok = tj <= BOUND and (vs is None or vs <= BOUND)
    parts = [f"fp32 {tj:.1e}"]
    if vs is not None:
        parts.append(f"Flex {vs:.1e}")
    if fx.get("err") is not None:
        parts.append(f"Flex vs fp32 {fx['err']:.1e}")
    return ("PASS " if ok else "FAIL ") + ", ".join(parts)


# ============================================================================================ matmul


MATMUL_SIZES = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (16384, 4096, 4096)]


@suite("matmul", "bf16 matmul: tilejit_matmul (autotuned) beside torch.matmul (cuBLAS), 2048³-8192³ and "
       "16384x4096x4096")
def run_matmul(ctx: Context):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    sizes = ctx.args.matmul_sizes or MATMUL_SIZES
    rows, skipped = [], []
    for m, n, k in sizes:
        name = f"{m}x{n}x{k}"
        if ctx.out_of_time(reserve_s=10):
            skipped.append(name)
            continue
        torch.manual_seed(0)
        a = torch.randn(m, k, device=DEVICE, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=DEVICE, dtype=torch.bfloat16)
        c = torch.empty(m, n, device=DEVICE, dtype=torch.bfloat16)
        ref = a.float() @ b.float()
        flops = 2.0 * m * n * k
        row = dict(name=name, errors=[])
        try:
            call = lambda: ctx.tj.matmul(a, b, c)  # noqa: E731
            row["first_s"] = first_call_s(call)
            row["config"] = config_text(ctx.tj.last_config())
            c.fill_(float("nan"))
            call()
            row["tj_err"] = rel_err(c, ref)
            row["tj_ms"] = bench_ms(call)
        except Exception as ex:  # noqa: BLE001
            row["errors"].append(f"tilejit: {short_error(ex)}")
        try:
            row["torch_err"] = rel_err(torch.matmul(a, b), ref)
            row["torch_ms"] = bench_ms(lambda: torch.matmul(a, b))
        except Exception as ex:  # noqa: BLE001
            row["errors"].append(f"torch.matmul: {short_error(ex)}")
        for key in ("tj", "torch"):
            if f"{key}_ms" in row:
                row[f"{key}_tflops"] = flops / (row[f"{key}_ms"] * 1e-3) / 1e12
        ctx.log(f"matmul {name}: tilejit {num(row.get('tj_tflops'), '.1f')} TFLOP/s ({verdict(row.get('tj_err'))}), "
                f"torch.matmul {num(row.get('torch_tflops'), '.1f')} TFLOP/s; {row.get('config', 'n/a')}")
        rows.append(row)
        del a, b, c, ref
        empty_cache()

    rep = Report(ctx, "Matmul, bf16")
    table = [[r["name"], verdict(r.get("tj_err")), verdict(r.get("torch_err")), num(r.get("tj_ms"), ".3f"),
              num(r.get("tj_tflops"), ".1f"), num(r.get("torch_ms"), ".3f"), num(r.get("torch_tflops"), ".1f"),
              f"{r['tj_tflops'] / r['torch_tflops']:.2f}x" if r.get("tj_tflops") and r.get("torch_tflops") else "-",
              r.get("config", "n/a"), num(r.get("first_s"), ".2f")] for r in rows]
    rep.section("c = a·b, M x N x K, bf16 in and out, fp32 accumulation; FLOPs = 2·M·N·K",
                *md_table(["M x N x K", "tilejit check", "torch check", "tilejit ms", "tilejit TFLOP/s",
                           "torch ms", "torch TFLOP/s", "tilejit/torch", "tilejit config",
                           "tilejit first call, s (tunes)"], table, right={3, 4, 5, 6, 7, 9}))
    notes = common_method_notes() + [
        "- tilejit: tilejit_matmul (row-major, autotuned: BLOCK_M ∈ {64,128}, BLOCK_N ∈ {64,128,256}, BLOCK_K ∈ "
        "{32,64}, 4 or 8 warps, 1-4 stages; the first call per shape bucket tunes). 'tilejit config' is the pick "
        "(tilejit_last_launch_config), BLOCK_M x BLOCK_N x BLOCK_K.",
        "- torch: torch.matmul (cuBLAS), TF32 off. The reference is the fp32 product of the same bf16 inputs.",
    ]
    rep.section("Method", *notes)
    errors = [f"- {r['name']}: {e}" for r in rows for e in r["errors"]]
    if errors or skipped:
        rep.section("Errors and skipped sizes", *errors,
                    *([f"- not run (time budget spent): {', '.join(skipped)}"] if skipped else []))
    note = plot_bars(rep.path("png"), [r["name"] for r in rows],
                     {"tilejit": [r.get("tj_tflops") for r in rows],
                      "torch.matmul": [r.get("torch_tflops") for r in rows]},
                     "bf16 matmul", "TFLOP/s")
    if note:
        rep.add(f"({note})")
    rep.write()


# ============================================================================================ decode


DECODE_HEADS_Q, DECODE_HEADS_KV, DECODE_DIM = 32, 8, 128
DECODE_SHAPES = [(1, 8192), (1, 131072), (8, 8192), (8, 32768), (64, 1024), (64, 8192), (128, 8192), (256, 2048)]
DECODE_PAGE_SIZES = [16, 64]
DECODE_NEW_TOKENS = [1, 4]
DECODE_CONTIGUOUS_PAGE = 256  # the contiguous row: the cache as one tensor, block table the identity, pages of 256
DECODE_WINDOW = 4096          # the sliding-window rows: each query sees its last 4096 keys (itself included)
DECODE_MODS = ("alibi", "softcap", "window")
DECODE_SOFTCAP = 50.0         # the soft-cap rows: cap·tanh(score / cap), Gemma 2's attention cap
DECODE_MODS_PAGE = 16         # the mods rows' page size
DECODE_PEERS = ("cuDNN", "FA2", "Flex")
DECODE_PARTS = DECODE_PEERS + ("graph", "contiguous", "mods", "ceiling")  # what --decode-skip can leave out


def decode_new_tokens() -> int:
    """Tokens appended per sequence through tilejit_paged_kv_append when the cache is built (the most any cell
    treats as new)."""
    return max(DECODE_NEW_TOKENS)


class DecodeCache:
    """One (batch, context)'s K/V: token-major [B, L, Hkv, D] (also the contiguous row's pages), the peers'
    dense copies [B, Hkv, L, D], and a paged cache per page size with a shuffled block table."""

    def __init__(self, tj: Tilejit, batch: int, context: int, page_sizes: list[int]):
        import torch
        self.b, self.l, self.hkv, self.d = batch, context, DECODE_HEADS_KV, DECODE_DIM
        torch.manual_seed(0)
        self.k = torch.randn(batch, context, self.hkv, self.d, device=DEVICE, dtype=torch.bfloat16)
        self.v = torch.randn(batch, context, self.hkv, self.d, device=DEVICE, dtype=torch.bfloat16)
        self.k_dense = self.k.transpose(1, 2).contiguous()
        self.v_dense = self.v.transpose(1, 2).contiguous()
        self.lens = torch.full((batch,), context, device=DEVICE, dtype=torch.int32)
        self.paged = {ps: self._paged(tj, ps) for ps in page_sizes}
        cp = min(DECODE_CONTIGUOUS_PAGE, context)
        n = batch * (context // cp)
        self.contiguous = self._struct(self.k.view(n, cp, self.hkv, self.d), self.v.view(n, cp, self.hkv, self.d),
                                       torch.arange(n, device=DEVICE, dtype=torch.int32).view(batch, -1), cp)

    def _struct(self, kp, vp, table, page_size: int) -> dict:
        kv = PagedKV(k_pages=kp.data_ptr(), v_pages=vp.data_ptr(), block_table=table.data_ptr(),
                     seq_lens=self.lens.data_ptr(), dtype=0, num_pages=kp.shape[0], page_size=page_size,
                     heads_kv=self.hkv, head_dim=self.d, max_pages_per_seq=table.shape[1])
        return dict(kv=kv, k=kp, v=vp, table=table, page_size=page_size)  # the tensors live as long as kv

    def _paged(self, tj: Tilejit, ps: int) -> dict:
        """Pages in a shuffled order (two spare pages no sequence owns), NaN wherever no token was written; the
        last decode_new_tokens() tokens of each sequence are written by tilejit_paged_kv_append."""
        import torch
        if self.l % ps:
            raise ValueError(f"context {self.l} is not a multiple of the page size {ps}")
        per_seq = self.l // ps
        num_pages = self.b * per_seq + 2
        gen = torch.Generator().manual_seed(ps)
        phys = torch.randperm(num_pages, generator=gen)[: self.b * per_seq].to(DEVICE)
        table = phys.view(self.b, per_seq).to(torch.int32).contiguous()
        kp = torch.full((num_pages, ps, self.hkv, self.d), float("nan"), device=DEVICE, dtype=torch.bfloat16)
        vp = torch.full_like(kp, float("nan"))
        kp[phys] = self.k.view(self.b * per_seq, ps, self.hkv, self.d)
        vp[phys] = self.v.view(self.b * per_seq, ps, self.hkv, self.d)
        new = decode_new_tokens()
        t = torch.arange(self.l - new, self.l, device=DEVICE)
        slots = (table[:, t // ps].long() * ps + t % ps).reshape(-1)  # [B·new], sequence-major
        kp.view(-1, self.hkv, self.d)[slots] = float("nan")
        vp.view(-1, self.hkv, self.d)[slots] = float("nan")
        cache = self._struct(kp, vp, table, ps)
        tj.paged_kv_append(cache["kv"], self.k[:, -new:].reshape(-1, self.hkv, self.d),
                           self.v[:, -new:].reshape(-1, self.hkv, self.d), slots.to(torch.int32))
        sync()
        return cache


def decode_visible(context: int, sq: int, mod: str) -> int:
    """Keys of one sequence that some new token sees (what a kernel must read at least once)."""
    return min(context, DECODE_WINDOW + sq - 1) if mod == "window" else context


def decode_bytes(b: int, context: int, sq: int, mod: str) -> float:
    """K and V bytes of the visible keys, plus q and out (bf16)."""
    kv = 2.0 * b * DECODE_HEADS_KV * decode_visible(context, sq, mod) * DECODE_DIM * 2
    return kv + 2.0 * b * sq * DECODE_HEADS_Q * DECODE_DIM * 2


def decode_reference(q, k_dense, v_dense, sq: int, mod: str, slopes):
    """fp32 decode: q [B, Hq, sq, D], dense k/v [B, Hkv, L, D]; query i at position L − sq + i, causal among the
    new tokens; mod 'none', 'alibi' (slopes per query head) or 'window' (the last DECODE_WINDOW keys).
    [B, Hq, sq, D], computed for a few sequences at a time."""
    import torch
    b_all, hq, _, d = q.shape
    hkv, L = k_dense.shape[1], k_dense.shape[2]
    g = hq // hkv
    pos = (L - sq + torch.arange(sq, device=q.device)).repeat(g)[:, None]         # row g·sq + i
    head = (torch.arange(hkv, device=q.device)[:, None] * g +
            torch.arange(g * sq, device=q.device)[None, :] // sq)                   # [Hkv, G·sq]
    j = torch.arange(L, device=q.device)[None, :]
    visible = j <= pos
    if mod == "window":
        visible = visible & (j > pos - DECODE_WINDOW)
    out = torch.empty(b_all, hq, sq, d, device=q.device, dtype=torch.float32)
    step = max(1, (1 << 18) // L)
    for b0 in range(0, b_all, step):
        b1 = min(b_all, b0 + step)
        qf = q[b0:b1].float().reshape(b1 - b0, hkv, g * sq, d)
        s = qf @ k_dense[b0:b1].float().transpose(-1, -2) / math.sqrt(d)                 # [b, Hkv, G·sq, L]
        if mod == "alibi":
            s = s - slopes[head][..., None] * (pos - j).abs().float()
        if mod == "softcap":
            s = DECODE_SOFTCAP * torch.tanh(s / DECODE_SOFTCAP)
        s = s.masked_fill(~visible, float("-inf"))
        o = torch.softmax(s, dim=-1) @ v_dense[b0:b1].float()
        out[b0:b1] = o.reshape(b1 - b0, hq, sq, d)
    return out


def decode_peers(skip: set):
    """{name: fn(q [B, Hq, sq, D], k, v [B, Hkv, L, D]) -> out} on the dense cache, causal bottom-right among
    the new tokens, and {name: why unavailable}."""
    import torch
    import torch.nn.functional as F
    peers, missing = {}, {}
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as ex:
        return {}, {p: short_error(ex) for p in DECODE_PEERS if p not in skip}
    masks = {}

    def bottom_right(sq, L, device):
        if (sq, L) not in masks:
            i = torch.arange(sq, device=device)[:, None]
            masks[(sq, L)] = torch.arange(L, device=device)[None, :] <= i + (L - sq)
        return masks[(sq, L)]

    if "cuDNN" not in skip:
        if DEVICE != "cuda":
            missing["cuDNN"] = "no GPU"
        elif not hasattr(SDPBackend, "CUDNN_ATTENTION"):
            missing["cuDNN"] = f"this torch ({torch.__version__}) has no SDPA cuDNN backend"
        else:
            def cudnn(q, k, v):
                sq, L = q.shape[2], k.shape[2]
                mask = None if sq == 1 else bottom_right(sq, L, q.device)
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
            peers["cuDNN"] = cudnn
    if "FA2" not in skip:
        try:
            from torch.backends.cuda import SDPAParams, can_use_flash_attention
            from torch.nn.attention.bias import causal_lower_right

            def fa2(q, k, v):
                sq, L = q.shape[2], k.shape[2]
                if sq == 1:
                    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                # SDPA's is_causal is top-left (and refused by the flash backend when sq ≠ L): the lower-right
                # CausalBias runs the flash kernel with its causal mask aligned bottom-right, never falling back
                # to another kernel here (checked first).
                if not can_use_flash_attention(SDPAParams(q, k, v, None, 0.0, False, True)):
                    raise Unavailable("the flash kernel refuses these inputs")
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(sq, L),
                                                          enable_gqa=True)
            peers["FA2"] = fa2
        except ImportError as ex:
            missing["FA2"] = short_error(ex)
    if "Flex" not in skip:
        try:
            flex, create_block_mask = compiled_flex()

            def run_flex(q, k, v):
                sq, L = q.shape[2], k.shape[2]
                if sq == 1:
                    return flex(q, k, v, enable_gqa=True)
                if ("flex", sq, L) not in masks:
                    off = L - sq
                    masks[("flex", sq, L)] = create_block_mask(lambda b, h, qi, ki: ki <= qi + off, None, None, sq,
                                                               L, device=q.device)
                return flex(q, k, v, block_mask=masks[("flex", sq, L)], enable_gqa=True)
            peers["Flex"] = run_flex
        except Exception as ex:  # noqa: BLE001
            missing["Flex"] = short_error(ex)
    return peers, missing


_READ_KERNEL = None
READ_CEILING_ROW = "read ceiling"
READ_CEILING_BLOCK = 8192  # elements of K (and of V) per program of the read ceiling's kernel


def read_ceiling():
    """fn(k, v) that streams both tensors once (a Triton kernel: each program loads 8192 elements of each, 16-byte
    loads, and writes one f32 partial sum) and returns the partial sums: what reading the cache's bytes alone
    costs, timed like the attention rows. One untuned configuration: a reference read, not a proven bound."""
    global _READ_KERNEL
    import torch
    import triton
    import triton.language as tl
    if _READ_KERNEL is None:
        @triton.jit
        def stream_read(k_ptr, v_ptr, out_ptr, n, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            k = tl.load(k_ptr + offs, mask=m, other=0.0).to(tl.float32)
            v = tl.load(v_ptr + offs, mask=m, other=0.0).to(tl.float32)
            tl.store(out_ptr + pid, tl.sum(k + v, 0))
        _READ_KERNEL = stream_read
    parts = {}

    def run(k, v):
        n = k.numel()
        grid = triton.cdiv(n, READ_CEILING_BLOCK)
        if n not in parts:
            parts[n] = torch.empty(grid, device=k.device, dtype=torch.float32)
        _READ_KERNEL[(grid,)](k, v, parts[n], n, BLOCK=READ_CEILING_BLOCK, num_warps=8)
        return parts[n]
    return run


def interleaved_times(fns: dict, rounds: int, warmup_ms: int = 2, rep_ms: int = 10):
    """Median time (ms) of each fn over `rounds` rounds, every fn timed once per round back to back, the order
    reversed every other round (the GPU's clock drifts: implementations compared inside one cell are timed
    within a second of each other). Returns ({name: ms}, {name: error} for those that raised, then left out)."""
    names = list(fns)
    times, errors = {n: [] for n in names}, {}
    for r in range(rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            if n in errors:
                continue
            try:
                times[n].append(bench_ms(fns[n], warmup_ms, rep_ms))
            except Exception as ex:  # noqa: BLE001
                errors[n] = f"timing: {short_error(ex)}"
    return {n: statistics.median(t) for n, t in times.items() if t and n not in errors}, errors


def decode_shape_name(b: int, context: int) -> str:
    return f"b{b} ctx{context // 1024}k" if context >= 1024 and context % 1024 == 0 else f"b{b} ctx{context}"


class DecodeCell:
    """One (batch, context, new tokens): every implementation's call, check, time and bandwidth."""

    def __init__(self, b: int, context: int, sq: int):
        self.b, self.context, self.sq = b, context, sq
        self.name = f"{decode_shape_name(b, context)} q{sq}"
        self.ms: dict[str, float] = {}
        self.err: dict[str, float] = {}
        self.errors: dict[str, str] = {}
        self.info: dict[str, dict] = {}       # tilejit plans: splits, block_n, plan seconds
        self.mod: dict[str, str] = {}         # row -> mod ('none', 'alibi', 'window')

    def tbs(self, row: str) -> Optional[float]:
        ms = self.ms.get(row)
        return decode_bytes(self.b, self.context, self.sq, self.mod.get(row, "none")) / (ms * 1e-3) / 1e12 \
            if ms else None

    def ok(self, row: str) -> bool:
        return row in self.ms and self.err.get(row, math.inf) <= BOUND


def decode_cell(ctx: Context, dc: DecodeCache, sq: int, peers: dict, skip: set, slopes, params,
                failures: list) -> DecodeCell:
    """Plans, checks and times every row of one cell; destroys its plans and graphs before returning. A tilejit
    row that fails its check or raises (other than Unavailable) is added to `failures`."""
    import torch
    started = time.monotonic()
    tj, cell = ctx.tj, DecodeCell(dc.b, dc.l, sq)
    b, L, hq, d = dc.b, dc.l, DECODE_HEADS_Q, DECODE_DIM
    torch.manual_seed(sq)
    q = torch.randn(b, sq, hq, d, device=DEVICE, dtype=torch.bfloat16)   # tilejit's layout [B, sq, Hq, D]
    q_peer = q.transpose(1, 2).contiguous()                                # the peers' [B, Hq, sq, D]
    out = torch.empty_like(q)
    refs = {}
    calls, plans, user_plans, graphs = {}, [], [], []

    def ref(mod):
        if mod not in refs:
            refs[mod] = decode_reference(q_peer, dc.k_dense, dc.v_dense, sq, mod, slopes)
        return refs[mod]

    def check(row, mod, produce):
        """produce() runs the row once and returns its output as [B, Hq, sq, D]."""
        cell.mod[row] = mod
        got = produce()
        sync()
        cell.err[row] = rel_err(got, ref(mod))
        if cell.err[row] > BOUND:
            failures.append(f"{cell.name} {row}: relative error {cell.err[row]:.2e} > {BOUND:g}")
            ctx.log(f"CHECK FAILED: {cell.name} {row}: relative error {cell.err[row]:.2e}")

    def failed(row, ex, ours=True):
        """Records an exception of a row; one of tilejit's (not Unavailable) fails the suite."""
        if isinstance(ex, Unavailable):
            cell.errors[row] = f"n/a — {ex}"
            return
        cell.errors[row] = short_error(ex)
        if ours:
            failures.append(f"{cell.name} {row}: {cell.errors[row]}")

    def poisoned(call):
        """call() on a NaN-filled out, which is returned as [B, Hq, sq, D]."""
        def run():
            out.fill_(float("nan"))
            call()
            return out.transpose(1, 2)
        return run

    def tilejit_row(row, cache, mod="none"):
        variant = FlexVariant()
        tj.lib.tilejit_flex_variant_init(ctypes.byref(variant))
        variant.causal = int(sq > 1 or mod == "window")
        if mod == "window":
            variant.window_left = DECODE_WINDOW - 1
        variant.alibi = int(mod == "alibi")
        t0 = time.perf_counter()
        plan = tj.decode_plan(cache["kv"], b, hq, sq, L, variant)
        plans.append(plan)
        cell.info[row] = dict(tj.decode_info(plan), plan_s=time.perf_counter() - t0)
        call = lambda: tj.decode_run(plan, q, out, None, cache["kv"])  # noqa: E731
        check(row, mod, poisoned(call))
        calls[row] = call
        return call

    rows = [(f"tilejit p{ps}", dc.paged[ps]) for ps in sorted(dc.paged)]
    if "contiguous" not in skip:
        rows.append(("tilejit contiguous", dc.contiguous))
    for row, cache in rows:
        try:
            call = tilejit_row(row, cache)
            if "graph" in skip or row == "tilejit contiguous":
                continue
            grow = row + " graph"
            try:
                if DEVICE != "cuda":
                    raise Unavailable("no GPU")
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    call()
                graphs.append(g)
                check(grow, "none", poisoned(g.replay))
                calls[grow] = g.replay
            except Exception as ex:  # noqa: BLE001
                failed(grow, ex)
        except Exception as ex:  # noqa: BLE001
            failed(row, ex)
    if "mods" not in skip and DECODE_MODS_PAGE in dc.paged:
        cache = dc.paged[DECODE_MODS_PAGE]
        for mod in DECODE_MODS:
            for kind, name in (("built-in", f"builtin:{mod}"), ("user lambda", mod)):
                row = f"{mod} {kind}"
                try:
                    um = ctx.user_mods()
                    t0 = time.perf_counter()
                    plan = um.decode_plan(name, params, cache["kv"], b, hq, sq, L, causal=sq > 1)
                    user_plans.append(plan)
                    cell.info[row] = dict(plan_s=time.perf_counter() - t0)
                    call = lambda plan=plan: um.decode_run(plan, q, out, None, cache["kv"])  # noqa: E731
                    check(row, mod, poisoned(call))
                    calls[row] = call
                except Exception as ex:  # noqa: BLE001
                    failed(row, ex)
    if "ceiling" not in skip and DEVICE == "cuda":
        row = READ_CEILING_ROW
        try:
            read = read_ceiling()
            # Every program's partial sum against float64: a program that skipped its block or read another's
            # fails (the dense caches' sizes are multiples of the block). Each tensor is widened once.
            got = read(dc.k_dense, dc.v_dense).double()
            want, scale = torch.zeros_like(got), torch.zeros_like(got)
            for t in (dc.k_dense, dc.v_dense):
                wide = t.view(-1, READ_CEILING_BLOCK).double()
                want += wide.sum(1)
                scale += wide.abs().sum(1)
                del wide
            bad = int(((got - want).abs() > 1e-5 * scale).sum())
            if bad:
                raise RuntimeError(f"{bad} of its {got.numel()} partial sums differ from the cache's")
            calls[row] = lambda: read(dc.k_dense, dc.v_dense)  # noqa: E731
        except Exception as ex:  # noqa: BLE001
            failed(row, ex, ours=False)
    for name, peer in peers.items():
        try:
            fn = lambda peer=peer: peer(q_peer, dc.k_dense, dc.v_dense)  # noqa: E731
            check(name, "none", fn)  # the checked call is also its first (compile) call
            calls[name] = fn
        except Exception as ex:  # noqa: BLE001
            failed(name, ex, ours=False)
    cell.ms, timing_errors = interleaved_times(calls, ctx.args.decode_rounds)
    for row, e in timing_errors.items():
        cell.errors[row] = e
        if row not in peers and row != READ_CEILING_ROW:  # only tilejit's rows fail the suite
            failures.append(f"{cell.name} {row}: {e}")
    sync()
    del graphs[:]
    for plan in plans:
        tj.decode_destroy(plan)
    for plan in user_plans:
        ctx.user_mods().decode_destroy(plan)
    cells = ", ".join(f"{r} {cell.ms[r] * 1e3:.1f} us" for r in cell.ms)
    ctx.log(f"{cell.name} ({time.monotonic() - started:.1f} s): {cells}")
    for row, e in cell.errors.items():
        ctx.log(f"    {row}: {e}")
    return cell


def best_peer(cell: DecodeCell) -> Optional[str]:
    """The fastest peer that passed its check."""
    ok = [p for p in DECODE_PEERS if cell.ok(p)]
    return min(ok, key=lambda p: cell.ms[p]) if ok else None


@suite("decode", "decode over a paged KV cache: tilejit's planned decode (direct and CUDA graph, pages of 16/64, a "
       "contiguous cache, ALiBi and window 4096 as built-in and user lambda) beside SDPA cuDNN, SDPA FA2 and "
       "FlexAttention on a dense cache; GQA 32/8, d128, bf16, 1 and 4 new tokens")
def run_decode(ctx: Context):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    args = ctx.args
    skip = set(args.decode_skip)
    shapes = args.decode_shapes or DECODE_SHAPES
    if not ctx.tj.has_decode:
        raise RuntimeError(f"{ctx.tj.path} has no decode C ABI (tilejit_decode_plan_create)")
    peers, missing = decode_peers(skip)
    slopes = torch.tensor(alibi_slopes(DECODE_HEADS_Q), device=DEVICE, dtype=torch.float32)
    params = UserModsParams(alibi_slopes=slopes.data_ptr(), window=DECODE_WINDOW - 1, softcap=DECODE_SOFTCAP)
    cells, skipped, failures = [], [], []
    for b, context in shapes:
        todo = [f"{decode_shape_name(b, context)} q{sq}" for sq in DECODE_NEW_TOKENS]
        if ctx.out_of_time(reserve_s=20):
            skipped += todo
            continue
        try:
            dc = DecodeCache(ctx.tj, b, context, DECODE_PAGE_SIZES)
        except Exception as ex:  # noqa: BLE001
            ctx.log(f"{decode_shape_name(b, context)}: building the caches failed: {short_error(ex)}")
            failures.append(f"{decode_shape_name(b, context)}: building the caches: {short_error(ex)}")
            continue
        for sq in DECODE_NEW_TOKENS:
            if ctx.out_of_time(reserve_s=20):
                skipped.append(f"{decode_shape_name(b, context)} q{sq}")
                continue
            cells.append(decode_cell(ctx, dc, sq, peers, skip, slopes, params, failures))
        del dc
        empty_cache()
    decode_report(ctx, cells, skipped, failures, peers, missing, skip)
    if failures:
        raise RuntimeError("decode: tilejit rows failed (a check against fp32 or an error):\n  " +
                           "\n  ".join(failures))


def decode_report(ctx: Context, cells: list, skipped: list, failures: list, peers: dict, missing: dict, skip: set):
    args = ctx.args
    rep = Report(ctx, "Decode over a paged KV cache")
    pages = sorted(DECODE_PAGE_SIZES)
    here = [p for p in DECODE_PEERS if p in peers or p in missing]

    def us(cell, row):
        if row in cell.ms:
            return f"{cell.ms[row] * 1e3:.1f}" + ("" if cell.ok(row) else " (check FAILED)")
        return "err" if row in cell.errors and not cell.errors[row].startswith("n/a") else "n/a"

    def tb(cell, row):
        v = cell.tbs(row)
        return f"{v:.2f}" if v is not None else "-"

    def ratio(cell, a, b, unit="x"):  # b's time over a's: above 1, a is faster
        return f"{cell.ms[b] / cell.ms[a]:.2f}{unit}" if a in cell.ms and b in cell.ms else "-"

    def shape_cells(c):
        return [c.b, f"{c.context // 1024}k" if c.context >= 1024 else c.context, c.sq]

    ceiling = "ceiling" not in skip
    headers = (["batch", "context", "new tokens"] + [f"tilejit p{p} µs" for p in pages] +
               [f"tilejit p{p} TB/s" for p in pages] + [f"{p} TB/s" for p in here] + ["best peer"] +
               [f"tilejit p{p}/best" for p in pages] +
               ([f"{READ_CEILING_ROW} TB/s"] + [f"tilejit p{p} of ceiling" for p in pages] if ceiling else []))
    table = []
    for c in cells:
        best = best_peer(c)
        table.append(shape_cells(c) + [us(c, f"tilejit p{p}") for p in pages] +
                     [tb(c, f"tilejit p{p}") for p in pages] +
                     [tb(c, p) if c.ok(p) else us(c, p) for p in here] + [best or "-"] +
                     [ratio(c, f"tilejit p{p}", best) if best else "-" for p in pages] +
                     ([tb(c, READ_CEILING_ROW)] + [ratio(c, f"tilejit p{p}", READ_CEILING_ROW, "")
                                                 for p in pages] if ceiling else []))
    rep.section(f"tilejit vs peers: GQA {DECODE_HEADS_Q}/{DECODE_HEADS_KV} heads, d{DECODE_DIM}, bf16, every "
                "sequence `context` tokens long (the new ones included); TB/s = (K+V bytes of the visible keys + "
                "q + out) / time", *md_table(headers, table))

    headers = (["batch", "context", "new tokens", "contiguous µs"] +
               [f"p{p}/contiguous" for p in pages] +
               [f"p{p} graph µs" for p in pages] + [f"p{p} direct/graph" for p in pages] +
               [f"p{p} splits, block_n, plan s" for p in pages])
    table = []
    for c in cells:
        table.append(shape_cells(c) + [us(c, "tilejit contiguous")] +
                     [ratio(c, "tilejit contiguous", f"tilejit p{p}", "") for p in pages] +
                     [us(c, f"tilejit p{p} graph") for p in pages] +
                     [ratio(c, f"tilejit p{p} graph", f"tilejit p{p}", "") for p in pages] +
                     [(lambda i: f"{i['num_splits']}, {i['block_n']}, {i['plan_s']:.2f}" if i else "-")(
                         c.info.get(f"tilejit p{p}")) for p in pages])
    rep.section("The cost of paging (time over the contiguous cache's) and of launching (direct call over CUDA "
                "graph replay)", *md_table(headers, table))

    mp = f"tilejit p{DECODE_MODS_PAGE}"
    headers = ["batch", "context", "new tokens", "no mod µs"]
    for mod in DECODE_MODS:
        headers += [f"{mod} built-in µs", f"{mod} lambda µs", f"{mod} lambda/built-in", f"{mod} built-in vs no mod",
                    f"{mod} built-in TB/s"]
    table = []
    for c in cells:
        cells_row = shape_cells(c) + [us(c, mp)]
        for mod in DECODE_MODS:
            bi, ul = f"{mod} built-in", f"{mod} user lambda"
            cells_row += [us(c, bi), us(c, ul), ratio(c, bi, ul, ""),
                          ratio(c, mp, bi, ""), tb(c, bi)]
        table.append(cells_row)
    rep.section(f"Mods at pages of {DECODE_MODS_PAGE}: ALiBi, soft-cap {DECODE_SOFTCAP:g} and a sliding window of "
                f"{DECODE_WINDOW} keys, "
                "tilejit's built-in beside the same math as a user's C++ lambda", *md_table(headers, table))

    rows = sorted({r for c in cells for r in list(c.err) + list(c.errors)},
                  key=lambda r: (not r.startswith("tilejit"), r))
    checks = [[c.name] + [verdict(c.err[r]) if r in c.err else
                          ("n/a" if c.errors.get(r, "n/a").startswith("n/a") else "err") for r in rows]
              for c in cells]
    rep.section("Checks: relative Frobenius error against fp32 (every sequence, every head)",
                *md_table(["cell"] + rows, checks, right=set()))

    notes = common_method_notes() + [
        f"- Shapes: {DECODE_HEADS_Q} query heads over {DECODE_HEADS_KV} KV heads (GQA), head_dim {DECODE_DIM}, bf16, "
        "softmax scale 1/sqrt(d). Every sequence holds `context` tokens, the new ones included: new token i of "
        "`new tokens` sits at position context − new + i and sees the keys up to itself (causal among the new "
        "tokens, bottom-right).",
        f"- tilejit: tilejit_decode_plan_create once per row (compiling; 'plan s' is that call, kernels cached "
        "across rows and runs), then tilejit_decode_plan_run is timed: q [B, new, Hq, D], out likewise, lse not "
        "written. Paged rows pN: pages of N tokens [num_pages, N, Hkv, D], the block table a random permutation of "
        "the physical pages (plus two pages no sequence owns), every unwritten slot NaN, and each sequence's last "
        f"{decode_new_tokens()} tokens written by tilejit_paged_kv_append (so the check covers the append too). "
        f"contiguous: the cache as one tensor [B, context, Hkv, D], block table the identity, pages of "
        f"{DECODE_CONTIGUOUS_PAGE} tokens (256 is the largest the API takes; the context when shorter): "
        "pN/contiguous is the cost of paging.",
        "- graph: the same run captured once with torch.cuda.CUDAGraph (the ctypes call on torch's capture stream) "
        "and replayed; direct/graph = direct time over replay time (above 1: launch overhead the graph removes).",
        "- Peers, on the dense cache [B, Hkv, context, D] holding the same K/V, q [B, Hq, new, D], GQA without "
        "copying K/V (enable_gqa=True): cuDNN = SDPA under sdpa_kernel(CUDNN_ATTENTION), no mask for one new token, "
        "an explicit boolean bottom-right causal attn_mask [new, context] for several; FA2 = SDPA under "
        "sdpa_kernel(FLASH_ATTENTION), no mask for one new token, attn_mask=causal_lower_right(new, context) for "
        "several (SDPA's is_causal is top-left; the lower-right CausalBias runs the flash kernel with a "
        "bottom-right causal mask; it is checked to be usable first, so it never silently falls back); Flex = "
        "torch.compile(flex_attention, dynamic=False) with enable_gqa, no block mask for one new token, a "
        "create_block_mask of the bottom-right causal mask (built once per shape, outside the timing) for several. "
        "'best peer' is the fastest peer whose check passed; tilejit pN/best = best peer's time over tilejit's.",
        "- read ceiling: a reference read, one untuned Triton kernel that only reads the dense K and V once "
        "(16-byte loads, 8192 elements of each per program, one f32 sum written per program, each checked against "
        "float64), timed in the "
        "same rounds and with the same L2 flush; its TB/s counts the same bytes as the attention rows (the K/V "
        "bytes plus q and out). 'tilejit pN of ceiling' = the ceiling's time over tilejit's: how close the "
        "decode comes to merely reading its cache. The flush before each call leaves L2 full of dirty lines that "
        "every row's reads must first write back, so the ceiling of a small cache lies well below the large "
        "caches' 4.4–4.6 TB/s.",
        f"- Mods (pages of {DECODE_MODS_PAGE}, through examples/user_mods: user_mods_decode_plan_create/run): "
        f"ALiBi = score − slope[h]·|i − j| with the ALiBi paper's slopes for {DECODE_HEADS_Q} heads; soft-cap = "
        f"{DECODE_SOFTCAP:g}·tanh(score / {DECODE_SOFTCAP:g}); window = keys "
        f"i − {DECODE_WINDOW - 1} ≤ j ≤ i ({DECODE_WINDOW} keys). 'built-in' uses tilejit's alibi() / "
        "softcap() / sliding_window() (a band: only the pages inside the window are read), 'user lambda' the "
        "same math written "
        "as a C++ lambda over tiles (the window as a mask function). built-in vs no mod = the built-in's time "
        "over the no-mod row's (same page size). TB/s of the window rows count only the keys inside the window "
        f"(min(context, {DECODE_WINDOW} + new − 1) per sequence).",
        f"- Timing: every implementation of a cell is timed back to back in {args.decode_rounds} rounds (the order "
        "reversed every other round), each measurement triton.testing.do_bench over about 10 ms after 2 ms of "
        "warm-up with L2 flushed between calls (else CUDA events), median over the rounds.",
        "- A tilejit row whose check exceeds the bound, or that raises, fails the suite (the report is still "
        "written first).",
    ]
    notes += [f"- {p}: n/a — {why}" for p, why in missing.items()]
    if skip:
        notes.append(f"- left out (--decode-skip): {', '.join(sorted(skip))}")
    rep.section("Method", *notes)
    errors = grouped_errors([(c.name, r, e) for c in cells for r, e in c.errors.items()
                             if not e.startswith("n/a")])
    if errors or skipped or failures:
        rep.section("Errors, failed checks and skipped cells", *errors, *[f"- CHECK FAILED: {f}" for f in failures],
                    *([f"- not run (time budget --budget-s {args.budget_s:g} s spent): {', '.join(skipped)}"]
                      if skipped else []))
    panels = []
    for sq in DECODE_NEW_TOKENS:
        here_cells = [c for c in cells if c.sq == sq]
        series = {row: [c.tbs(row) if c.ok(row) else None for c in here_cells]
                  for row in [f"tilejit p{p}" for p in pages] + [f"tilejit p{p} graph" for p in pages] + list(here)}
        panels.append((f"{sq} new token{'s' if sq > 1 else ''}",
                       [decode_shape_name(c.b, c.context) for c in here_cells], series))
    note = plot_bar_panels(rep.path("png"), panels, f"Decode, GQA {DECODE_HEADS_Q}/{DECODE_HEADS_KV} "
                           f"d{DECODE_DIM} bf16: achieved bandwidth (visible K+V, q, out)", "TB/s")
    if note:
        rep.add(f"({note})")
    rep.write()


# ============================================================================================ compile


COMPILE_SHAPE = dict(batch=4, heads=16, seqlen=4096, head_dim=128)
COMPILE_KERNELS = [
    dict(name="attention_fwd", op="attention", causal=False),
    dict(name="attention_fwd causal", op="attention", causal=True),
    dict(name="flex, no mod", op="flex", mod="none"),
    dict(name="flex alibi", op="flex", mod="alibi"),
    dict(name="flex softcap 50", op="flex", mod="softcap"),
    dict(name="flex document mask", op="flex", mod="document"),
    dict(name="flex causal window 256", op="flex", mod="window"),
    dict(name="flex backward, no mod", op="flex_backward", mod="none"),
    dict(name="flex backward softcap 50", op="flex_backward", mod="softcap"),
    dict(name="matmul 4096³", op="matmul", size=4096),
]
# The autotuner's header line (TILEJIT_PRINT_AUTOTUNING=1): candidates, compiled, timed, finalists, its two phases.
TUNER_LINE = re.compile(r"(\d+) configs, (\d+) compiled, (\d+) timed \((\d+) finalists\)(?:, full search)?; "
                        r"compile (\d+) ms, timing (\d+) ms")


def compile_op(tj: Tilejit, spec: dict):
    """The call (and its inputs) of one kernel of the compile suite."""
    import torch
    torch.manual_seed(0)
    if spec["op"] == "matmul":
        n = spec["size"]
        a, b = (torch.randn(n, n, device=DEVICE, dtype=torch.bfloat16) for _ in range(2))
        c = torch.empty(n, n, device=DEVICE, dtype=torch.bfloat16)
        return lambda: tj.matmul(a, b, c)
    sh = COMPILE_SHAPE
    q, k, v = (torch.randn(sh["batch"], sh["heads"], sh["seqlen"], sh["head_dim"], device=DEVICE,
                           dtype=torch.bfloat16) for _ in range(3))
    out = torch.empty_like(q)
    if spec["op"] == "attention":
        return lambda: tj.attention(q, k, v, out, spec["causal"])
    ids = (torch.arange(sh["seqlen"], device=DEVICE, dtype=torch.int32) // (sh["seqlen"] // DOCUMENTS))
    docs = ids.expand(sh["batch"], sh["seqlen"]).contiguous()
    fields = dict(none={}, alibi=dict(alibi=1), softcap=dict(softcap=SOFTCAP),
                  document=dict(doc_ids=docs.data_ptr(), reuse_block_mask=1),
                  window=dict(causal=1, window_left=WINDOW))[spec["mod"]]
    if spec["op"] == "flex_backward":
        # The forward compiles and runs here, before the timed call: the row is the backward's three kernels.
        variant = tj.variant(**fields, autotune=0)
        lse = torch.empty(sh["batch"], sh["heads"], sh["seqlen"], device=DEVICE, dtype=torch.float32)
        dout, dq, dk, dv = (torch.randn_like(q) for _ in range(4))
        tj.flex(q, k, v, out, variant, lse)
        sync()
        return lambda: (docs, tj.flex_backward(q, k, v, out, lse, dout, dq, dk, dv, variant))
    variant = tj.variant(**fields)
    return lambda: (docs, tj.flex(q, k, v, out, variant))  # docs kept alive with the call


def compile_child(args) -> int:
    """In a child process (fresh CUDA context, the cache directory the parent chose): one call of one
    kernel, then its statistics as a JSON line."""
    import torch
    spec = json.loads(args.compile_child)
    tj = Tilejit(args.lib)
    call = compile_op(tj, spec)
    sync()
    result = dict()
    try:
        t0 = time.perf_counter()
        call()
        sync()
        result["call_ms"] = (time.perf_counter() - t0) * 1e3
        result["stats"] = tj.compile_stats()
        result["config"] = tj.last_config()
        times = []
        for _ in range(10 if DEVICE == "cuda" else 0):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            call()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        result["run_ms"] = statistics.median(times) if times else None
    except Exception as ex:  # noqa: BLE001
        result["error"] = short_error(ex)
    print(json.dumps(result), flush=True)
    return 0


def run_compile_child(ctx: Context, spec: dict, cache_dir: str, print_tuning: bool) -> dict:
    env = dict(os.environ, TILEJIT_CACHE_DIR=cache_dir, CUDA_CACHE_DISABLE="1")
    env.pop("TILEJIT_PRINT_AUTOTUNING", None)
    if print_tuning:
        env["TILEJIT_PRINT_AUTOTUNING"] = "1"
    cmd = [sys.executable, os.path.abspath(__file__), "--lib", ctx.args.lib, "--compile-child", json.dumps(spec)]
    if ctx.args.smoke:
        cmd.append("--smoke")
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                           timeout=max(30.0, min(300.0, ctx.time_left())))
    except subprocess.TimeoutExpired:
        return dict(error="timed out")
    lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
    if not lines:
        return dict(error=f"child exited {p.returncode}: {p.stderr.strip()[-300:]}")
    r = json.loads(lines[-1])
    tuner = [tuple(int(g) for g in m.groups()) for m in TUNER_LINE.finditer(p.stderr)]
    if tuner:
        r["tuner"] = dict(configs=sum(t[0] for t in tuner), compiled=sum(t[1] for t in tuner),
                          compile_ms=sum(t[4] for t in tuner), timing_ms=sum(t[5] for t in tuner))
    return r


@suite("compile", "compile times: the first autotuned call for a new shape, and cold/warm compiles of the "
       "config the autotuner picks, for attention, flex variants and matmul (each in a fresh process)")
def run_compile(ctx: Context):
    rows, skipped = [], []
    for spec in COMPILE_KERNELS:
        if ctx.out_of_time(reserve_s=40):
            skipped.append(spec["name"])
            continue
        row = dict(name=spec["name"])
        first_dir = tempfile.mkdtemp(prefix="tilejit-first-")
        cold_dir = tempfile.mkdtemp(prefix="tilejit-cold-")
        try:
            row["first"] = run_compile_child(ctx, spec, first_dir, print_tuning=True)
            # Only the tuner's winners move to the second cache: the cold process compiles just the pick.
            for path in glob.glob(os.path.join(first_dir, "**", "autotune-*.json"), recursive=True):
                dst = os.path.join(cold_dir, os.path.relpath(path, first_dir))
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy(path, dst)
            row["cold"] = run_compile_child(ctx, spec, cold_dir, print_tuning=False)
            row["warm"] = run_compile_child(ctx, spec, cold_dir, print_tuning=False)
        finally:
            shutil.rmtree(first_dir, ignore_errors=True)
            shutil.rmtree(cold_dir, ignore_errors=True)
        ctx.log(f"compile {spec['name']}: " + "; ".join(
            f"{phase} {num(row[phase].get('call_ms'), '.0f')} ms"
            + (f" ({row[phase]['stats']['source']})" if "stats" in row[phase] else "")
            + (f" error {row[phase]['error']}" if "error" in row[phase] else "")
            for phase in ("first", "cold", "warm")))
        rows.append(row)

    rep = Report(ctx, "Compile times")
    table = []
    for r in rows:
        first, cold, warm = r["first"], r["cold"], r["warm"]
        tuner = first.get("tuner", {})
        st = cold.get("stats", {})
        run_ms = cold.get("run_ms")
        rest = None
        if "call_ms" in cold and st:
            rest = cold["call_ms"] - st["codegen_ms"] - st["link_ms"] - st["load_ms"] - (run_ms or 0)
        table.append([
            r["name"], config_text(first.get("config")),
            num(first.get("call_ms") and first["call_ms"] / 1e3, ".2f"),
            (f"{tuner['configs']} / {tuner['compiled']} / {tuner['compile_ms'] / 1e3:.2f} / "
             f"{tuner['timing_ms'] / 1e3:.2f}" if tuner else "n/a"),
            num(cold.get("call_ms"), ".0f"), st.get("source", "n/a"), num(st.get("codegen_ms"), ".0f"),
            num(st.get("link_ms"), ".0f"), num(st.get("load_ms"), ".1f"), num(rest, ".0f"),
            num(warm.get("call_ms"), ".1f"), warm.get("stats", {}).get("source", "n/a"), num(run_ms, ".3f")])
    headers = ["kernel", "autotuner's pick", "first autotuned call, s",
               "tuner: configs / compiled / compile s / timing s",
               "cold call, ms", "cold source", "codegen ms", "driver link ms", "load ms", "rest ms",
               "warm call, ms", "warm source", "kernel run ms"]
    rep.section(f"bf16; attention and flex at b{COMPILE_SHAPE['batch']} h{COMPILE_SHAPE['heads']} "
                f"s{COMPILE_SHAPE['seqlen']} d{COMPILE_SHAPE['head_dim']}",
                *md_table(headers, table, right={2, 4, 6, 7, 8, 9, 10, 12}))
    notes = [
        "- Each kernel runs in three child processes (fresh CUDA context, CUDA_CACHE_DISABLE=1 so the driver's "
        "own JIT cache does not hide the PTX → cubin link):",
        "  1. **first autotuned call**: an empty TILEJIT_CACHE_DIR; the wall time of the first call for this "
        "shape: trace, compile the candidate configs the tuner keeps (its register estimates and its prior of "
        "measured winners skip the rest) on parallel host threads, time them on the GPU, run the winner. 'tuner' "
        "splits it: number of candidates / of those compiled / compiling them / timing them (the autotuner's own "
        "report, TILEJIT_PRINT_AUTOTUNING=1).",
        "  2. **cold**: a cache directory holding only the tuner's winners (its autotune-*.json files): the first "
        "call finds the pick on disk and compiles only that config. codegen (IR → LLVM → PTX), driver link "
        "(PTX → cubin), load: tilejit_last_compile_stats of the call's last kernel (for the document mask, the "
        "flex kernel; its block-mask kernel compiles just before, inside 'rest'; for the backward rows, whichever "
        "of its three kernels, compiled at once on host threads, finished last: their cold call is the whole "
        "backward's, its forward compiled and run before the timing). rest = call − codegen − link − "
        "load − one run: tracing, cache look-ups, block masks, launch.",
        "  3. **warm**: a second process on the same directory: the cubin comes from the disk cache.",
        "- 'cold source' should read 'compiled' and 'warm source' 'cubin cache'. 'kernel run ms': the picked "
        "kernel's own time (CUDA events, median of 10) in the cold process.",
        "- Times include tilejit's first use of the driver in the process (PyTorch created the context before).",
    ]
    rep.section("Method", *notes)
    errors = [f"- {r['name']} {phase}: {r[phase]['error']}" for r in rows for phase in ("first", "cold", "warm")
              if "error" in r[phase]]
    if errors or skipped:
        rep.section("Errors and skipped kernels", *errors,
                    *([f"- not run (time budget spent): {', '.join(skipped)}"] if skipped else []))
    note = plot_bars(rep.path("png"), [r["name"] for r in rows],
                     {"first autotuned call": [r["first"].get("call_ms") for r in rows],
                      "cold (picked config)": [r["cold"].get("call_ms") for r in rows],
                      "warm (disk cache)": [r["warm"].get("call_ms") for r in rows]},
                     "Compile time of the first call (ms, log scale)", "ms", log=True)
    if note:
        rep.add(f"({note})")
    rep.write()


# ============================================================================================ main


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description="tilejit's benchmark suites (results in <results>/<suite>.md and .png).",
        epilog="suites:\n" + "\n".join(f"  {s.name:<9} {s.summary}" for s in SUITES.values()),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suites", nargs="*", metavar="SUITE", help="suites to run, in order")
    ap.add_argument("--list", action="store_true", help="list the suites and exit")
    ap.add_argument("--lib", help="libtilejit.so(.0) to load (e.g. carry/libtilejit.so.0 or build/libtilejit.so.0)")
    ap.add_argument("--user-mods", default="", help="libtilejit_user_mods.so (default: beside --lib, then the "
                    "build tree)")
    ap.add_argument("--results", default="", help="where <suite>.md/.png go (default: bench/results)")
    ap.add_argument("--budget-s", type=float, default=0.0, help="soft time limit per suite in seconds: rows not "
                    "started by then are listed as skipped (0: none)")
    ap.add_argument("--seqlens", type=lambda s: [int(x) for x in s.split(",") if x], default=None,
                    help="protocol/mods: comma-separated sequence lengths instead of the suite's")
    ap.add_argument("--head-dims", type=lambda s: [int(x) for x in s.split(",") if x], default=[64, 128],
                    help="protocol: head dims (default 64,128)")
    ap.add_argument("--rounds", type=int, default=7, help="mods: back-to-back rounds per overhead (default 7)")
    ap.add_argument("--check-heads", type=int, default=2, help="mods: heads of batch 0 checked against fp32")
    ap.add_argument("--matmul-sizes", type=lambda s: [tuple(int(v) for v in x.split("x")) for x in s.split(",") if x],
                    default=None, help="matmul: MxNxK,... (default 2048³, 4096³, 8192³, 16384x4096x4096)")
    ap.add_argument("--decode-shapes", type=lambda s: [tuple(int(v) for v in x.split("x")) for x in s.split(",") if x],
                    default=None, help="decode: BATCHxCONTEXT,... instead of the suite's eight")
    ap.add_argument("--decode-skip", type=lambda s: [x for x in s.split(",") if x], default=[],
                    help=f"decode: parts to leave out, comma-separated ({', '.join(DECODE_PARTS)})")
    ap.add_argument("--decode-rounds", type=int, default=2, help="decode: back-to-back rounds per cell (default 2)")
    ap.add_argument("--smoke", action="store_true", help="check the driver itself without a GPU: tiny shapes, "
                    "CPU tensors, tilejit on its interpreter (TILEJIT_INTERPRET=1), results in a temporary folder "
                    "unless --results is given; the numbers mean nothing")
    ap.add_argument("--compile-child", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.list:
        return args
    if not args.lib:
        ap.error("--lib is required")
    unknown = [s for s in args.suites if s not in SUITES]
    if unknown:
        ap.error(f"unknown suite(s) {unknown}; choose from {list(SUITES)}")
    if not args.suites and not args.compile_child:
        ap.error("name at least one suite (--list shows them)")
    bad = [x for x in args.decode_skip if x not in DECODE_PARTS]
    if bad:
        ap.error(f"--decode-skip: unknown part(s) {bad}; choose from {list(DECODE_PARTS)}")
    return args


def use_smoke_shapes():
    """--smoke: every suite's shapes shrunk so the CPU interpreter runs them in seconds."""
    global DEVICE, PROTOCOL_SEQLENS, PROTOCOL_TOKENS, PROTOCOL_HIDDEN, MODS_HEADS, MODS_DIM, MODS_TOKENS
    global MODS_SEQLENS, WINDOW, MAX_DISTANCE, WINDOW_SEQLEN, MATMUL_SIZES, COMPILE_SHAPE, BACKWARD_MOD_SEQLEN
    global DECODE_HEADS_Q, DECODE_HEADS_KV, DECODE_DIM, DECODE_SHAPES, DECODE_CONTIGUOUS_PAGE, DECODE_WINDOW
    DEVICE = "cpu"
    os.environ["TILEJIT_INTERPRET"] = "1"
    PROTOCOL_SEQLENS, PROTOCOL_TOKENS, PROTOCOL_HIDDEN = [64, 128], 256, 128
    MODS_HEADS, MODS_DIM, MODS_TOKENS, MODS_SEQLENS = 2, 32, 256, [64, 128]
    WINDOW, MAX_DISTANCE, WINDOW_SEQLEN = 16, 8, 128
    BACKWARD_MOD_SEQLEN = 128
    MATMUL_SIZES = [(64, 48, 80)]
    COMPILE_SHAPE = dict(batch=1, heads=2, seqlen=64, head_dim=32)
    DECODE_HEADS_Q, DECODE_HEADS_KV, DECODE_DIM = 4, 2, 32
    DECODE_SHAPES, DECODE_CONTIGUOUS_PAGE, DECODE_WINDOW = [(2, 128), (1, 192)], 64, 40
    for spec in COMPILE_KERNELS:
        if spec["op"] == "matmul":
            spec["size"], spec["name"] = 64, "matmul 64³"



def main(argv=None) -> int:
    args = parse_args(argv)
    if args.list:
        for s in SUITES.values():
            print(f"{s.name:<9} {s.summary}")
        return 0
    if args.smoke:
        use_smoke_shapes()
        if not args.results and not args.compile_child:
            args.results = tempfile.mkdtemp(prefix="tilejit-bench-smoke-")
    args.results = args.results or os.path.join(HERE, "results")
    if args.compile_child:
        return compile_child(args)
    import torch
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("bench.py needs a CUDA GPU visible to PyTorch (--smoke checks the driver without one)", file=sys.stderr)
        return 2
    failed = []
    for name in args.suites:
        t0 = time.monotonic()
        print(f"# suite {name}", flush=True)
        try:
            SUITES[name].run(Context(args, name))
        except Exception:  # noqa: BLE001 (a suite's crash must not lose the others)
            traceback.print_exc()
            failed.append(name)
        print(f"# suite {name}: {time.monotonic() - t0:.0f} s{' (FAILED)' if name in failed else ''}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
