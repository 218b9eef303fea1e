#!/usr/bin/env python3
"""Differential testing of nnc against ONNX Runtime on random valid ONNX graphs (issue 4).

Run with the pip `python3` on PATH (scripts/setup.sh installs onnx==1.17.0, onnxruntime==1.20.1 and
numpy into it); Debian's /usr/bin/python3 has no onnxruntime.

    python3 scripts/difftest_ort.py --count 150 --seed 1 --nnc build/tools/nnc
    python3 scripts/difftest_ort.py --seed 1234 --count 1 --keep /tmp/difftest_ort   # replay one graph

What it does, per graph seed S (graph k of a run has seed --seed + k):
  * builds a random ONNX graph (opset 18) that is valid by construction with onnx.helper (this file's
    own generator, independent of fuzz/random_graph.cpp) and checks it with onnx.checker (full check,
    strict shape inference, so the declared output shapes are checked too);
  * makes seeded random inputs and runs the graph with ONNX Runtime (CPUExecutionProvider,
    ORT_DISABLE_ALL: ORT's own fusions are not the reference);
  * compiles it with `nnc MODEL.onnx -o MODEL.so -O<level>` for each --opt-levels (default 0,2) and
    runs the .so through its C ABI (include/nnc/model.h) with ctypes, in a forked child so that a
    crash or hang in the model is reported, not fatal. To save compile time, --batch graphs (default
    10) are merged into one model (disjoint subgraphs, names prefixed per seed); when a merged model
    fails to compile or run, its graphs are retried one by one to find the culprit;
  * compares every output: f32 within 1e-5 + 1e-4*|ort|; f64 computed only in f64 within
    1e-10 + 1e-8*|ort| (f64 values derived from f32 math get the f32 tolerance); integers exactly;
    NaN matches NaN and infinities match exactly; dtypes and shapes must be equal.

Numerics are kept well-conditioned so that a mismatch means a bug, not rounding: the generator tracks a
bound on every float value and rescales by a power of two (exact) before it can grow large; Floor/Ceil
and comparisons only see "exact" values (computed with correctly rounded operations only, so every
implementation gets the same bits); Log/Sqrt/Div only see arguments kept away from 0.

Prints one line per mismatch / error with the graph seed and a replay command, then
    difftest_ort: N graphs (M nodes), K mismatches, E nnc errors, G invalid graphs
and exits 1 when any of K, E, G is non-zero (G counts graphs that onnx.checker or ORT rejected: a
generator bug). Exits 77 when onnx or onnxruntime cannot be imported (CTest SKIP_RETURN_CODE).
--keep DIR writes DIR/seed_S/model.onnx with test_data_set_0/input_K.pb (the inputs) and
output_K.pb (ORT's outputs), the layout `nnc test DIR/seed_S` reads; --keep-failures DIR does so for
failing graphs only. --minimize DIR finds, for each failing graph, the first node whose output differs
and writes a one-node model reproducing it (its other inputs hold ORT's values) to DIR/seed_S_min.
"""
import argparse
import ctypes
import math
import os
import pickle
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    import onnxruntime as ort
except ImportError as e:  # CTest treats 77 as "skipped"
    print(f"difftest_ort: SKIP: cannot import onnx/onnxruntime/numpy ({e}); "
          "scripts/setup.sh installs onnx==1.17.0 onnxruntime==1.20.1 numpy", flush=True)
    sys.exit(77)

OPSET = 18  # reductions take axes as an input, Split has num_outputs, Pad has axes; ORT 1.20 runs it
F32, F64, I32, I64, BOOL = "float32", "float64", "int32", "int64", "bool"
FLOATS = (F32, F64)
INTS = (I32, I64)
ONNX_TYPE = {F32: TensorProto.FLOAT, F64: TensorProto.DOUBLE, I32: TensorProto.INT32, I64: TensorProto.INT64,
             BOOL: TensorProto.BOOL}
MAX_NUMEL = 1536  # every tensor stays small: compile time dominates anyway
MAX_RANK = 5
INT64_MAX = 2**63 - 1


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def broadcast(*shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None


class V:
    """A value of the graph being generated."""
    __slots__ = ("name", "dt", "shape", "bound", "exact", "lowp", "uses", "kind")

    def __init__(self, name, dt, shape, bound, exact, lowp, kind="op"):
        self.name, self.dt, self.shape = name, dt, tuple(shape)
        self.bound = float(bound)  # |value| <= bound (ints: exactly; floats: a safe over-estimate)
        self.exact = exact  # bit-identical in every correct implementation (correctly rounded ops only)
        self.lowp = lowp  # depends on inexact f32 math (so f64 results get the f32 tolerance)
        self.uses = 0
        self.kind = kind  # "input", "const" or "op"

    @property
    def rank(self):
        return len(self.shape)


class Skip(Exception):
    """The chosen op does not apply to the chosen operand; the generator tries another."""


class GraphGen:
    def __init__(self, seed, prefix):
        self.seed = seed
        self.r = random.Random(seed)
        self.np = np.random.default_rng(seed + 7919)
        self.p = prefix
        self.counter = 0
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self.input_specs = {}  # name -> (dtype, shape, lo, hi)
        self.pool = []
        self.n_ops = 0

    # ---- plumbing -------------------------------------------------------------------------------
    def fresh(self, hint="v"):
        self.counter += 1
        return f"{self.p}{hint}{self.counter}"

    def node(self, op, ins, n_out=1, **attrs):
        outs = [self.fresh(op[:4].lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, ins, outs, name=self.fresh("n_" + op), **attrs))
        self.n_ops += 1
        return outs if n_out > 1 else outs[0]

    def use(self, *vals):
        for v in vals:
            v.uses += 1

    def add(self, name, dt, shape, bound, exact, lowp):
        v = V(name, dt, shape, bound, exact, lowp)
        self.pool.append(v)
        return v

    def const_name(self, arr):
        """An initializer (mostly) or a Constant node holding arr; returns its name."""
        name = self.fresh("c")
        t = numpy_helper.from_array(np.asarray(arr), name)
        if self.r.random() < 0.3:
            self.nodes.append(helper.make_node("Constant", [], [name], name=self.fresh("n_Constant"), value=t))
        else:
            self.inits.append(t)
        return name

    def i64(self, values):
        return self.const_name(np.array(values, dtype=np.int64))

    def rand_data(self, dt, shape, lo=-2.0, hi=2.0):
        if dt in FLOATS:
            return self.np.uniform(lo, hi, size=shape).astype(dt)
        return self.np.integers(int(lo), int(hi) + 1, size=shape).astype(dt)

    def const_val(self, dt, shape, lo=-2.0, hi=2.0, away_from_zero=None):
        """A constant operand (a pool-less V, exact)."""
        data = self.rand_data(dt, shape, lo, hi)
        if away_from_zero is not None:  # |x| in [away_from_zero, hi]
            mag = self.rand_data(dt, shape, away_from_zero, hi)
            sign = np.where(self.np.random(size=shape) < 0.5, -1, 1).astype(dt)
            data = (mag * sign).astype(dt)
        bound = float(np.max(np.abs(data))) if data.size else 0.0
        return V(self.const_name(data), dt, shape, bound, True, False, kind="const")

    def new_input(self, dt, shape, lo=None, hi=None):
        name = self.fresh("in")
        if lo is None:
            lo, hi = (-2.0, 2.0) if dt in FLOATS else (-4, 4)
        self.inputs.append(helper.make_tensor_value_info(name, ONNX_TYPE[dt], list(shape)))
        self.input_specs[name] = (dt, tuple(shape), lo, hi)
        return V(name, dt, shape, max(abs(lo), abs(hi)), True, False, kind="input")

    def operand(self, dt, shape, p_input=0.4):
        """A fresh operand of the given dtype/shape: a graph input or a constant."""
        if self.r.random() < p_input:
            v = self.new_input(dt, shape)
            self.pool.append(v)
            return v
        return self.const_val(dt, shape)

    def scalar_const(self, dt, value):
        return self.const_name(np.array(value, dtype=dt))

    def pick(self, pred=lambda v: True):
        cands = [v for v in self.pool if pred(v)]
        if not cands:
            raise Skip()
        weights = [(i + 1) ** 2 for i in range(len(cands))]  # favour recent values: deeper chains
        return self.r.choices(cands, weights)[0]

    def pick_dt(self, dts, pred=lambda v: True):
        return self.pick(lambda v: v.dt in dts and pred(v))

    # ---- keeping values tame ---------------------------------------------------------------------
    def tame(self, v, limit):
        """Returns v scaled into [-limit, limit]: floats by a power of two (exact), ints by a Clip."""
        if v.bound <= limit:
            return v
        self.use(v)
        if v.dt in FLOATS:
            k = math.ceil(math.log2(v.bound / limit))
            f = 2.0 ** -k
            out = self.node("Mul", [v.name, self.scalar_const(v.dt, f)])
            return self.add(out, v.dt, v.shape, v.bound * f, v.exact, v.lowp)
        lim = int(limit)
        out = self.node("Clip", [v.name, self.scalar_const(v.dt, -lim), self.scalar_const(v.dt, lim)])
        return self.add(out, v.dt, v.shape, lim, v.exact, v.lowp)

    # ---- shapes ----------------------------------------------------------------------------------
    def rand_shape(self, rank=None, maxdim=5):
        if rank is None:
            rank = self.r.choices(range(6), [4, 10, 25, 28, 25, 8])[0]
        while True:
            s = tuple(self.r.choice([1, 1, 2, 2, 3, 3, 4, 5, 6][: maxdim + 3]) if self.r.random() < 0.8
                      else self.r.randint(1, maxdim) for _ in range(rank))
            if numel(s) <= 256:
                return s

    def image_shape(self, rank=4):
        n = self.r.choice([1, 1, 2])
        c = self.r.choice([1, 2, 3, 4, 6])
        sp = tuple(self.r.randint(3, 7 if rank < 5 else 4) for _ in range(rank - 2))
        return (n, c) + sp

    def sub_shape(self, shape):
        """A shape that broadcasts to `shape` (leading dims dropped, some dims set to 1)."""
        s = list(shape)
        if s and self.r.random() < 0.35:
            s = s[self.r.randint(0, len(s)):]
        return tuple(1 if self.r.random() < 0.3 else d for d in s)

    def super_shape(self, shape):
        """A shape that `shape` broadcasts to (dims of 1 grown, leading dims added)."""
        s = [self.r.randint(2, 4) if d == 1 and self.r.random() < 0.5 else d for d in shape]
        while len(s) < MAX_RANK and self.r.random() < 0.3:
            s.insert(0, self.r.randint(1, 3))
        s = tuple(s)
        return s if numel(s) <= MAX_NUMEL else tuple(shape)

    def partner_shape(self, shape):
        x = self.r.random()
        if x < 0.55:
            return self.sub_shape(shape)
        if x < 0.8:
            return tuple(shape)
        return self.super_shape(shape)

    def partner(self, a, p_pool=0.35):
        """A second operand of a's dtype that broadcasts with a (from the pool, or new)."""
        if self.r.random() < p_pool:
            cands = [v for v in self.pool if v is not a and v.dt == a.dt and broadcast(v.shape, a.shape) is not None
                     and numel(broadcast(v.shape, a.shape)) <= MAX_NUMEL]
            if cands:
                return self.r.choice(cands)
        return self.operand(a.dt, self.partner_shape(a.shape))

    # ---- op families -----------------------------------------------------------------------------
    def op_binary(self):
        a = self.pick_dt(FLOATS + INTS)
        op = self.r.choice(["Add", "Sub", "Mul", "Div", "Max", "Min", "Add", "Mul"])
        lim = 16.0 if a.dt in FLOATS else 1000.0
        a = self.tame(a, 4.0 if op == "Mul" else lim)
        b = self.tame(self.partner(a), 4.0 if op == "Mul" else lim)
        if op == "Div":  # divisors stay away from zero: a constant with |b| >= bmin, or |b| + c
            if b.kind == "const" and self.r.random() < 0.5:  # constant divisor away from zero
                b = self.const_val(a.dt, b.shape, 0.5 if a.dt in FLOATS else 1, 2.0 if a.dt in FLOATS else 4,
                                   away_from_zero=0.5 if a.dt in FLOATS else 1)
                bmin = 0.5 if a.dt in FLOATS else 1
            else:  # |b| + c
                c = self.r.choice([0.5, 1.0]) if a.dt in FLOATS else 1
                self.use(b)
                ab = self.node("Abs", [b.name])
                bn = self.node("Add", [ab, self.scalar_const(a.dt, c)])
                b = V(bn, a.dt, b.shape, b.bound + c, b.exact, b.lowp)
                bmin = c
            if self.r.random() < 0.5 and a.dt in FLOATS:
                # Divide by the picked value instead: the (now safe) partner becomes the dividend
                # and the picked value becomes |a| + c.
                a, b = b, a
                self.use(b)
                ab = self.node("Abs", [b.name])
                c = self.r.choice([0.5, 1.0])
                bn = self.node("Add", [ab, self.scalar_const(a.dt, c)])
                b = V(bn, a.dt, b.shape, b.bound + c, b.exact, b.lowp)
                bmin = c
            bound = a.bound / bmin
        elif op in ("Add", "Sub"):
            bound = a.bound + b.bound
        elif op == "Mul":
            bound = a.bound * b.bound
        else:
            bound = max(a.bound, b.bound)
        ops = [a, b]
        if op in ("Max", "Min") and self.r.random() < 0.25:  # variadic
            c = self.partner(a)
            ops.append(c)
            bound = max(bound, c.bound)
        if self.r.random() < 0.5 and op != "Div":
            self.r.shuffle(ops)
        shape = broadcast(*[v.shape for v in ops])
        if shape is None or numel(shape) > MAX_NUMEL:
            raise Skip()
        self.use(*ops)
        out = self.node(op, [v.name for v in ops])
        exact = all(v.exact for v in ops)
        if a.dt in INTS and op == "Div":
            exact = True
        return self.add(out, a.dt, shape, bound, exact, any(v.lowp for v in ops))

    def op_unary(self):
        a = self.pick_dt(FLOATS)
        dt = a.dt
        lowp = a.lowp or dt == F32
        ops = ["Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Erf", "Gelu", "LeakyRelu", "Clip",
               "Softplus", "HardSigmoid", "Neg", "Abs", "Floor", "Ceil", "Relu", "Tanh", "Gelu"]
        if dt == F64:  # ORT's CPU provider has Erf for float only
            ops = [o for o in ops if o not in ("Erf", "Gelu")]
        op = self.r.choice(ops)
        if op in ("Floor", "Ceil") and not a.exact:
            cands = [v for v in self.pool if v.dt in FLOATS and v.exact]
            if not cands:
                raise Skip()
            a = self.r.choice(cands)
            dt = a.dt
        if op in ("Relu", "Neg", "Abs", "Floor", "Ceil", "LeakyRelu", "Clip"):
            a = self.tame(a, 16.0)
            self.use(a)
            if op == "LeakyRelu":
                alpha = self.r.choice([0.01, 0.1, 0.2, 0.5])
                # Known nnc difference, f64 only: nnc takes the defaults of float attributes as double
                # literals (alpha 0.01), ONNX's defaults are float32 (0.01f), which ORT uses. So f64
                # graphs always spell out alpha (see the report of 2026-11-22 in docs/RELIABILITY.md).
                explicit = self.r.random() < 0.7 or dt == F64
                out = self.node(op, [a.name], alpha=alpha) if explicit else self.node(op, [a.name])
                return self.add(out, dt, a.shape, a.bound, a.exact, a.lowp)
            if op == "Clip":
                lo, hi = sorted(self.np.uniform(-1.5, 1.5, 2).astype(dt).tolist())
                which = self.r.choice(["both", "both", "min", "max", "none"])
                ins = [a.name]
                if which in ("both", "min"):
                    ins.append(self.scalar_const(dt, lo))
                if which == "both":
                    ins.append(self.scalar_const(dt, hi))
                if which == "max":
                    ins += ["", self.scalar_const(dt, hi)]
                out = self.node(op, ins)
                return self.add(out, dt, a.shape, a.bound, a.exact, a.lowp)
            out = self.node(op, [a.name])
            bound = a.bound + (1 if op in ("Floor", "Ceil") else 0)
            return self.add(out, dt, a.shape, bound, a.exact, a.lowp)
        if op == "Exp":
            a = self.tame(a, 4.0)
            self.use(a)
            return self.add(self.node("Exp", [a.name]), dt, a.shape, math.exp(a.bound), False, lowp)
        if op in ("Softplus", "HardSigmoid"):
            a = self.tame(a, 16.0)
            self.use(a)
            if op == "Softplus":
                return self.add(self.node(op, [a.name]), dt, a.shape, a.bound + 1, False, lowp)
            attrs = {}
            if self.r.random() < 0.7 or dt == F64:  # (explicit for f64: see LeakyRelu)
                attrs = dict(alpha=self.r.choice([0.2, 0.5, 0.1]), beta=self.r.choice([0.5, 0.3, 0.6]))
            return self.add(self.node(op, [a.name], **attrs), dt, a.shape, 1.0, False, lowp)
        a = self.tame(a, 16.0)
        self.use(a)
        if op == "Log":  # Log(|x| + 1)
            t = self.node("Add", [self.node("Abs", [a.name]), self.scalar_const(dt, 1.0)])
            return self.add(self.node("Log", [t]), dt, a.shape, math.log(a.bound + 1), False, lowp)
        if op == "Sqrt":  # Sqrt(|x|) for exact x; Sqrt(|x| + 0.25) else (no infinite slope at rounding noise)
            t = self.node("Abs", [a.name])
            if not a.exact:
                t = self.node("Add", [t, self.scalar_const(dt, 0.25)])
            return self.add(self.node("Sqrt", [t]), dt, a.shape, math.sqrt(a.bound + 0.25), False, lowp)
        if op == "Gelu":  # 0.5 * x * (1 + erf(x / sqrt(2))), written in one of two ways
            if self.r.random() < 0.5:
                s = self.node("Div", [a.name, self.scalar_const(dt, math.sqrt(2.0))])
            else:
                s = self.node("Mul", [a.name, self.scalar_const(dt, 1.0 / math.sqrt(2.0))])
            e = self.node("Add", [self.node("Erf", [s]), self.scalar_const(dt, 1.0)])
            h = self.node("Mul", [a.name, self.scalar_const(dt, 0.5)])
            out = self.node("Mul", [h, e] if self.r.random() < 0.5 else [e, h])
            return self.add(out, dt, a.shape, a.bound, False, lowp)
        bound = a.bound if op == "Relu" else 1.0
        return self.add(self.node(op, [a.name]), dt, a.shape, bound, False, lowp)

    def condition(self, shape_hint):
        """A bool tensor from comparing exact values (so every implementation agrees bit for bit)."""
        p = self.pick(lambda v: v.exact and v.dt in FLOATS + INTS)
        cmp = self.r.choice(["Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Equal"])
        if cmp == "Equal" and p.dt in FLOATS:
            # Equal on floats is only interesting on integral values: Floor both sides.
            q = self.const_val(p.dt, self.sub_shape(p.shape), -2, 2)
            self.use(p)
            pf = self.node("Floor", [p.name])
            qf = self.node("Floor", [q.name])
            c = self.node("Equal", [pf, qf])
            shape = broadcast(p.shape, q.shape)
        else:
            if self.r.random() < 0.5:
                q = self.const_val(p.dt, self.sub_shape(p.shape) if self.r.random() < 0.5 else (),
                                   -1.5 if p.dt in FLOATS else -3, 1.5 if p.dt in FLOATS else 3)
            else:
                cands = [v for v in self.pool if v is not p and v.exact and v.dt == p.dt
                         and broadcast(v.shape, p.shape) is not None
                         and numel(broadcast(v.shape, p.shape)) <= MAX_NUMEL]
                q = self.r.choice(cands) if cands else self.const_val(p.dt, ())
            self.use(p, q)
            args = [p.name, q.name] if self.r.random() < 0.5 else [q.name, p.name]
            c = self.node(cmp, args)
            shape = broadcast(p.shape, q.shape)
        if self.r.random() < 0.2:
            c = self.node("Not", [c])
        return c, shape

    def op_where(self):
        a = self.pick_dt(FLOATS + INTS)
        c, cshape = self.condition(a.shape)
        b = self.partner(a)
        shape = broadcast(cshape, a.shape, b.shape)
        if shape is None or numel(shape) > MAX_NUMEL:
            # fall back to a condition shaped like a: compare a (when exact) or an input of a's shape
            raise Skip()
        self.use(a, b)
        ins = [c, a.name, b.name] if self.r.random() < 0.5 else [c, b.name, a.name]
        out = self.node("Where", ins)
        return self.add(out, a.dt, shape, max(a.bound, b.bound), a.exact and b.exact, a.lowp or b.lowp)

    def op_compare_cast(self):
        c, shape = self.condition(None)
        if numel(shape) > MAX_NUMEL:
            raise Skip()
        dt = self.r.choice([F32, F32, F64, I32, I64])
        out = self.node("Cast", [c], to=ONNX_TYPE[dt])
        return self.add(out, dt, shape, 1.0, True, False)

    def axes_subset(self, rank, nonempty=True):
        k = self.r.randint(1 if nonempty else 0, rank)
        axes = self.r.sample(range(rank), k)
        return [ax - rank if self.r.random() < 0.3 else ax for ax in axes]

    def op_reduce(self):
        a = self.pick_dt(FLOATS + INTS)
        if a.dt in INTS:
            op = self.r.choice(["ReduceSum", "ReduceMax", "ReduceMin"])
        else:
            op = self.r.choice(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceLogSumExp",
                                "ReduceL1", "ReduceSumSquare", "ReduceSum", "ReduceMean"])
        a = self.tame(a, 4.0 if a.dt in FLOATS else 100.0)
        keep = self.r.random() < 0.5
        if a.rank == 0 or self.r.random() < 0.15:
            axes = None
            red = list(range(a.rank))
        else:
            axes = self.axes_subset(a.rank)
            red = sorted(ax % a.rank for ax in axes)
        n = numel([a.shape[i] for i in red])
        shape = tuple((1 if i in red else d) for i, d in enumerate(a.shape) if keep or i not in red)
        self.use(a)
        ins = [a.name] + ([self.i64(axes)] if axes is not None else [])
        attrs = {} if keep and self.r.random() < 0.5 else {"keepdims": int(keep)}
        out = self.node(op, ins, **attrs)
        bound = {"ReduceSum": a.bound * n, "ReduceMean": a.bound, "ReduceMax": a.bound, "ReduceMin": a.bound,
                 "ReduceL2": a.bound * math.sqrt(n), "ReduceLogSumExp": a.bound + math.log(n) + 1,
                 "ReduceL1": a.bound * n, "ReduceSumSquare": a.bound * a.bound * n}[op]
        exact = a.exact and (op in ("ReduceMax", "ReduceMin") or a.dt in INTS)
        return self.add(out, a.dt, shape, bound, exact, a.lowp or (a.dt == F32 and not exact))

    def op_softmax(self):
        a = self.pick_dt(FLOATS, lambda v: v.rank >= 1)
        a = self.tame(a, 8.0)
        op = self.r.choice(["Softmax", "LogSoftmax"])
        axis = self.r.randint(-a.rank, a.rank - 1)
        self.use(a)
        out = self.node(op, [a.name], axis=axis) if self.r.random() < 0.8 else self.node(op, [a.name])
        bound = 1.0 if op == "Softmax" else 2 * a.bound + math.log(numel(a.shape)) + 1
        return self.add(out, a.dt, a.shape, bound, False, a.lowp or a.dt == F32)

    def op_layernorm(self):
        a = self.pick_dt(FLOATS, lambda v: v.rank >= 1)
        a = self.tame(a, 8.0)
        # ORT computes the variance as E[x^2] - E[x]^2 in f32, which loses digits when |mean| >> std,
        # as two or three values often have (seed 4187: ORT off by 2e-5, nnc by 3e-7 from the f64
        # result). Normalize over 1 element (the output is the bias) or at least 4.
        axes = [ax for ax in range(-a.rank, 0) if numel(a.shape[ax:]) == 1 or numel(a.shape[ax:]) >= 4]
        if not axes:
            raise Skip()
        axis = self.r.choice(axes)
        nshape = a.shape[axis:]
        if self.r.random() < 0.4:
            axis += a.rank  # the same axis, counted from the front
        attrs = {"axis": axis} if axis != -1 or self.r.random() < 0.5 else {}
        # A row that is constant (broadcast along the normalized axes) has variance ~0: its output is
        # rounding noise / sqrt(epsilon). Keep epsilon large unless the input is a graph input.
        if a.kind == "input" and self.r.random() < 0.5:
            pass  # default epsilon 1e-5
        else:
            attrs["epsilon"] = self.r.choice([1e-3, 1e-2])
        scale = self.const_val(a.dt, nshape, 0.5, 1.5)
        ins = [a.name, scale.name]
        bias_bound = 0.0
        if self.r.random() < 0.6:  # (ORT wants scale and bias of the full normalized shape, no broadcast)
            b = self.const_val(a.dt, nshape)
            ins.append(b.name)
            bias_bound = b.bound
        self.use(a)
        out = self.node("LayerNormalization", ins, **attrs)
        bound = 1.5 * math.sqrt(max(numel(nshape), 1)) + bias_bound
        return self.add(out, a.dt, a.shape, bound, False, a.lowp or a.dt == F32)

    def op_rmsnorm(self):
        """RMSNorm as exporters write it (recognised as one RmsNormalization by nnc)."""
        a = self.pick_dt(FLOATS, lambda v: v.rank >= 1)
        a = self.tame(a, 8.0)
        k = self.r.randint(1, a.rank)
        nshape = a.shape[a.rank - k:]
        self.use(a)
        if self.r.random() < 0.5:
            sq = self.node("Pow", [a.name, self.scalar_const(a.dt, 2.0)])
        else:
            sq = self.node("Mul", [a.name, a.name])
        ms = self.node("ReduceMean", [sq, self.i64(list(range(-k, 0)))], keepdims=1)
        root = self.node("Sqrt", [self.node("Add", [ms, self.scalar_const(a.dt, self.r.choice([1e-3, 1e-2]))])])
        if self.r.random() < 0.5:
            out = self.node("Div", [a.name, root])
        else:
            out = self.node("Mul", [a.name, self.node("Reciprocal", [root])])
        scale = 1.0
        if self.r.random() < 0.7:
            w = self.const_val(a.dt, nshape, 0.5, 1.5)
            out = self.node("Mul", [out, w.name])
            scale = 1.5
        bound = scale * math.sqrt(max(numel(nshape), 1))  # |x| / rms(x) <= sqrt(n)
        return self.add(out, a.dt, a.shape, bound, False, a.lowp or a.dt == F32)

    def op_batchnorm(self):
        a = self.pick_dt(FLOATS, lambda v: v.rank >= 2)
        a = self.tame(a, 8.0)
        return self.batchnorm(a)

    def batchnorm(self, a):
        c = a.shape[1]
        scale = self.const_val(a.dt, (c,), 0.5, 1.5)
        bias = self.const_val(a.dt, (c,), -1, 1)
        mean = self.const_val(a.dt, (c,), -1, 1)
        var = self.const_val(a.dt, (c,), 0.5, 2.0)
        attrs = {"epsilon": 1e-3} if self.r.random() < 0.3 else {}
        self.use(a)
        out = self.node("BatchNormalization", [a.name, scale.name, bias.name, mean.name, var.name], **attrs)
        return self.add(out, a.dt, a.shape, (a.bound + 1) * 1.5 / 0.7 + 1, False, a.lowp or a.dt == F32)

    def op_transpose(self):
        a = self.pick(lambda v: v.rank >= 1)
        perm = list(range(a.rank))
        self.r.shuffle(perm)
        self.use(a)
        if self.r.random() < 0.2:
            out = self.node("Transpose", [a.name])
            perm = list(reversed(range(a.rank)))
        else:
            out = self.node("Transpose", [a.name], perm=perm)
        return self.add(out, a.dt, [a.shape[i] for i in perm], a.bound, a.exact, a.lowp)

    def factorize(self, n, rank):
        dims = [1] * rank
        if rank == 0:
            return dims
        f, m = 2, n
        while m > 1:
            while m % f == 0:
                dims[self.r.randrange(rank)] *= f
                m //= f
            f += 1
        return dims

    def op_reshape(self):
        a = self.pick()
        n = numel(a.shape)
        rank = self.r.randint(0 if n == 1 else 1, MAX_RANK)
        dims = self.factorize(n, rank)
        spec = list(dims)
        for i in range(rank):
            if i < a.rank and dims[i] == a.shape[i] and self.r.random() < 0.4:
                spec[i] = 0  # copy the input's dim (allowzero=0)
        if rank and self.r.random() < 0.5:
            spec[self.r.randrange(rank)] = -1
        self.use(a)
        out = self.node("Reshape", [a.name, self.i64(spec)])
        return self.add(out, a.dt, dims, a.bound, a.exact, a.lowp)

    def op_slice(self):
        a = self.pick(lambda v: v.rank >= 1)
        axes = self.axes_subset(a.rank)
        starts, ends, steps, out_shape = [], [], [], list(a.shape)
        for ax in axes:
            d = a.shape[ax]
            for _ in range(20):
                step = self.r.choice([1, 1, 1, 2, -1, -1, -2, 3])
                st = self.r.randint(-d - 2, d + 1)
                en = self.r.choice([self.r.randint(-d - 2, d + 1), INT64_MAX, -INT64_MAX - 1, -d - 5, d + 5])
                ln = len(range(*slice(st, en, step).indices(d)))
                if ln >= 1:
                    break
            else:
                st, en, step, ln = 0, d, 1, d
            starts.append(st)
            ends.append(en)
            steps.append(step)
            out_shape[ax] = ln
        ins = [a.name, self.i64(starts), self.i64(ends)]
        all_in_order = [x % a.rank for x in axes] == list(range(a.rank))
        if not (all_in_order and all(s == 1 for s in steps) and self.r.random() < 0.5):
            ins.append(self.i64(axes))
            if not (all(s == 1 for s in steps) and self.r.random() < 0.5):
                ins.append(self.i64(steps))
        elif not all_in_order:
            ins.append(self.i64(axes))
        self.use(a)
        out = self.node("Slice", ins)
        return self.add(out, a.dt, out_shape, a.bound, a.exact, a.lowp)

    def op_pad(self):
        a = self.pick(lambda v: v.rank >= 1)
        mode = self.r.choice(["constant", "constant", "edge", "reflect"])
        use_axes = self.r.random() < 0.3
        axes = self.axes_subset(a.rank) if use_axes else list(range(a.rank))
        begins, ends, shape = [], [], list(a.shape)
        for ax in axes:
            d = a.shape[ax]
            if mode == "reflect":
                hi = min(2, d - 1)
                pb, pe = self.r.randint(0, hi), self.r.randint(0, hi)
            elif mode == "edge":
                pb, pe = self.r.randint(0, 2), self.r.randint(0, 2)
            else:
                # Negative pads crop. Keep at least one input element on every axis: when the crop
                # removes all of an axis' data (the output is all padding), ORT 1.20 returns
                # uninitialised memory instead of the pad value (nnc gets it right).
                while True:
                    pb, pe = self.r.randint(-1, 2), self.r.randint(-1, 2)
                    if d + min(pb, 0) + min(pe, 0) >= 1:
                        break
            begins.append(pb)
            ends.append(pe)
            shape[ax] = d + pb + pe
        if numel(shape) > MAX_NUMEL:
            raise Skip()
        ins = [a.name, self.i64(begins + ends)]
        if mode == "constant" and self.r.random() < 0.6:
            ins.append(self.scalar_const(a.dt, self.r.choice([0, 1, -2, 3]) if a.dt in INTS else
                                         float(np.float32(self.r.uniform(-2, 2)))))
        if use_axes:
            if len(ins) == 2:
                ins.append("")
            ins.append(self.i64(axes))
        attrs = {"mode": mode} if mode != "constant" or self.r.random() < 0.5 else {}
        self.use(a)
        out = self.node("Pad", ins, **attrs)
        return self.add(out, a.dt, shape, max(a.bound, 3.0), a.exact, a.lowp)

    def op_concat(self):
        a = self.pick(lambda v: v.rank >= 1)
        axis = self.r.randint(-a.rank, a.rank - 1)
        ax = axis % a.rank
        ops = [a]
        for _ in range(self.r.randint(1, 2)):
            x = self.r.random()
            if x < 0.25:
                ops.append(a)
            else:
                cands = [v for v in self.pool if v.dt == a.dt and v.rank == a.rank and v is not a
                         and all(v.shape[i] == a.shape[i] for i in range(a.rank) if i != ax)]
                if cands and x < 0.55:
                    ops.append(self.r.choice(cands))
                else:
                    s = list(a.shape)
                    s[ax] = self.r.randint(1, 3)
                    ops.append(self.operand(a.dt, s))
        self.r.shuffle(ops)
        shape = list(a.shape)
        shape[ax] = sum(v.shape[ax] for v in ops)
        if numel(shape) > MAX_NUMEL:
            raise Skip()
        self.use(*ops)
        out = self.node("Concat", [v.name for v in ops], axis=axis)
        return self.add(out, a.dt, shape, max(v.bound for v in ops), all(v.exact for v in ops),
                        any(v.lowp for v in ops))

    def op_split(self):
        a = self.pick(lambda v: v.rank >= 1 and max(v.shape) >= 2)
        axes = [i for i, d in enumerate(a.shape) if d >= 2]
        ax = self.r.choice(axes)
        d = a.shape[ax]
        axis = ax - a.rank if self.r.random() < 0.3 else ax
        attrs = {"axis": axis} if axis != 0 or self.r.random() < 0.5 else {}
        ins = [a.name]
        if self.r.random() < 0.5:  # explicit sizes
            n = self.r.randint(2, min(d, 4))
            cuts = sorted(self.r.sample(range(1, d), n - 1))
            sizes = [b - c for c, b in zip([0] + cuts, cuts + [d])]
            ins.append(self.i64(sizes))
        else:  # num_outputs: ceil(d/n)-sized chunks, the last smaller; only n that leave it non-empty
            ns = [n for n in range(2, min(d, 4) + 1) if d - math.ceil(d / n) * (n - 1) >= 1]
            n = self.r.choice(ns)
            c = math.ceil(d / n)
            sizes = [c] * (n - 1) + [d - c * (n - 1)]
            attrs["num_outputs"] = n
        self.use(a)
        outs = self.node("Split", ins, n_out=len(sizes), **attrs)
        vals = []
        for o, sz in zip(outs, sizes):
            s = list(a.shape)
            s[ax] = sz
            vals.append(self.add(o, a.dt, s, a.bound, a.exact, a.lowp))
        return vals[-1]

    def op_gather(self):
        a = self.pick(lambda v: v.rank >= 1)
        ax = self.r.randrange(a.rank)
        d = a.shape[ax]
        q = self.r.choice([0, 1, 1, 1, 2])
        if a.rank - 1 + q > MAX_RANK:
            q = MAX_RANK - a.rank + 1
        ishape = tuple(self.r.randint(1, 4) for _ in range(q))
        idt = self.r.choice([I64, I64, I32])
        shape = a.shape[:ax] + ishape + a.shape[ax + 1:]
        if numel(shape) > MAX_NUMEL:
            raise Skip()
        if self.r.random() < 0.35:
            idx = self.new_input(idt, ishape, -d, d - 1)  # runtime indices, negative ones included
        else:
            data = self.np.integers(-d, d, size=ishape).astype(idt)
            idx = V(self.const_name(data), idt, ishape, d, True, False, "const")
        axis = ax - a.rank if self.r.random() < 0.3 else ax
        attrs = {"axis": axis} if axis != 0 or self.r.random() < 0.5 else {}
        self.use(a)
        out = self.node("Gather", [a.name, idx.name], **attrs)
        return self.add(out, a.dt, shape, a.bound, a.exact, a.lowp)

    def op_expand(self):
        a = self.pick()
        spec = []
        for d in a.shape:
            if d == 1:
                spec.append(self.r.choice([1, 2, 3, 4]))
            else:
                spec.append(1 if self.r.random() < 0.3 else d)  # Expand broadcasts both ways
        while len(spec) < MAX_RANK and self.r.random() < 0.35:
            spec.insert(0, self.r.randint(1, 3))
        if self.r.random() < 0.2 and len(spec) > 0:
            # a shorter shape than the input: its dims align at the back
            spec = spec[self.r.randint(1, len(spec)):] if len(spec) > a.rank else spec
        shape = broadcast(a.shape, tuple(spec))
        if shape is None or numel(shape) > MAX_NUMEL:
            raise Skip()
        self.use(a)
        out = self.node("Expand", [a.name, self.i64(spec)])
        return self.add(out, a.dt, shape, a.bound, a.exact, a.lowp)

    def op_tile(self):
        a = self.pick(lambda v: v.rank >= 1)
        reps = [self.r.choice([1, 1, 2, 3]) for _ in a.shape]
        shape = [d * k for d, k in zip(a.shape, reps)]
        if numel(shape) > MAX_NUMEL:
            raise Skip()
        self.use(a)
        out = self.node("Tile", [a.name, self.i64(reps)])
        return self.add(out, a.dt, shape, a.bound, a.exact, a.lowp)

    def op_flatten(self):
        a = self.pick(lambda v: v.rank >= 1)
        axis = self.r.randint(-a.rank, a.rank)
        ax = axis % a.rank if axis < 0 else axis
        self.use(a)
        out = self.node("Flatten", [a.name], axis=axis) if axis != 1 or self.r.random() < 0.5 else \
            self.node("Flatten", [a.name])
        return self.add(out, a.dt, [numel(a.shape[:ax]), numel(a.shape[ax:])], a.bound, a.exact, a.lowp)

    def op_squeeze(self):
        if self.r.random() < 0.5:
            a = self.pick(lambda v: 1 in v.shape)
            ones = [i for i, d in enumerate(a.shape) if d == 1]
            self.use(a)
            if self.r.random() < 0.25:
                out = self.node("Squeeze", [a.name])
                gone = ones
            else:
                gone = self.r.sample(ones, self.r.randint(1, len(ones)))
                out = self.node("Squeeze", [a.name, self.i64([g - a.rank if self.r.random() < 0.3 else g
                                                                for g in gone])])
            shape = [d for i, d in enumerate(a.shape) if i not in gone]
            return self.add(out, a.dt, shape, a.bound, a.exact, a.lowp)
        a = self.pick(lambda v: v.rank < MAX_RANK)
        k = self.r.randint(1, min(2, MAX_RANK - a.rank))
        r = a.rank + k
        pos = self.r.sample(range(r), k)
        shape, src = [], iter(a.shape)
        for i in range(r):
            shape.append(1 if i in pos else next(src))
        self.use(a)
        out = self.node("Unsqueeze", [a.name, self.i64([p - r if self.r.random() < 0.3 else p for p in pos])])
        return self.add(out, a.dt, shape, a.bound, a.exact, a.lowp)

    def op_matmul(self):
        a = self.pick_dt(FLOATS + INTS, lambda v: v.rank >= 1)
        a = self.tame(a, 2.0 if a.dt in FLOATS else 8.0)
        n = self.r.randint(1, 6)
        wlo = -1.0 if a.dt in FLOATS else -3
        if self.r.random() < 0.7 or a.rank == 1:  # a @ B
            k = a.shape[-1]
            if a.rank == 1:
                bshape = self.r.choice([(k,), (k, n), (2, k, n)])
            else:
                batch = a.shape[:-2]
                bshape = self.r.choice([(k,), (k, n), self.sub_shape(batch) + (k, n), self.super_shape(batch) + (k, n)])
            b = self.operand(a.dt, bshape, 0.4) if self.r.random() < 0.8 else self.operand(a.dt, bshape, 1.0)
            if b.kind == "const":
                b = self.const_val(a.dt, bshape, wlo, -wlo)
            lhs, rhs = a, b
        else:  # B @ a, a is (..., k, n)
            k = a.shape[-2]
            bshape = self.r.choice([(k,), (n, k), self.sub_shape(a.shape[:-2]) + (n, k)])
            b = self.operand(a.dt, bshape)
            if b.kind == "const":
                b = self.const_val(a.dt, bshape, wlo, -wlo)
            lhs, rhs = b, a
        b = self.tame(b, 2.0 if a.dt in FLOATS else 8.0)
        ls, rs = lhs.shape, rhs.shape
        l2 = ls if len(ls) >= 2 else (1,) + ls
        r2 = rs if len(rs) >= 2 else rs + (1,)
        batch = broadcast(l2[:-2], r2[:-2])
        if batch is None or l2[-1] != r2[-2]:
            raise Skip()
        shape = batch + (l2[-2],) + (r2[-1],)
        if len(ls) == 1:
            shape = shape[:-2] + shape[-1:]
        if len(rs) == 1:
            shape = shape[:-1]
        if numel(shape) > MAX_NUMEL or len(shape) > MAX_RANK:
            raise Skip()
        self.use(lhs, rhs)
        out = self.node("MatMul", [lhs.name, rhs.name])
        kk = l2[-1]
        exact = a.dt in INTS and lhs.exact and rhs.exact
        v = self.add(out, a.dt, shape, lhs.bound * rhs.bound * kk, exact, lhs.lowp or rhs.lowp or a.dt == F32)
        return self.epilogue(v)

    def epilogue(self, v):
        """Bias / activation / residual after an anchor (what fusion turns into an epilogue)."""
        if v.dt not in FLOATS or self.r.random() < 0.4:
            return v
        x = self.r.random()
        if x < 0.4 and v.rank >= 1:
            bias = self.const_val(v.dt, (v.shape[-1],) if v.rank and self.r.random() < 0.7 else self.sub_shape(v.shape))
            self.use(v)
            v = self.add(self.node("Add", [v.name, bias.name]), v.dt, v.shape, v.bound + bias.bound, False, v.lowp)
        elif x < 0.55:
            r = self.operand(v.dt, v.shape)
            self.use(v, r)
            v = self.add(self.node("Add", [r.name, v.name]), v.dt, v.shape, v.bound + r.bound, False, v.lowp)
        act = self.r.choice(["Relu", "Sigmoid", "Tanh", "Clip", "LeakyRelu", None])
        if act is None:
            return v
        self.use(v)
        if act == "Clip":
            out = self.node("Clip", [v.name, self.scalar_const(v.dt, 0.0), self.scalar_const(v.dt, 6.0)])
            return self.add(out, v.dt, v.shape, 6.0, False, v.lowp)
        attrs = {"alpha": 0.1} if act == "LeakyRelu" else {}
        out = self.node(act, [v.name], **attrs)
        return self.add(out, v.dt, v.shape, v.bound if act in ("Relu", "LeakyRelu") else 1.0, False, v.lowp)

    def op_gemm(self):
        a = self.pick_dt(FLOATS, lambda v: v.rank >= 1)
        if a.rank != 2:
            self.use(a)
            ax = self.r.randint(0, a.rank)
            out = self.node("Flatten", [a.name], axis=ax)
            a = self.add(out, a.dt, [numel(a.shape[:ax]), numel(a.shape[ax:])], a.bound, a.exact, a.lowp)
        a = self.tame(a, 2.0)
        trans_a, trans_b = self.r.random() < 0.3, self.r.random() < 0.5
        m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
        n = self.r.randint(1, 8)
        if m * n > MAX_NUMEL:
            raise Skip()
        bshape = (n, k) if trans_b else (k, n)
        b = self.operand(a.dt, bshape, 0.3)
        if b.kind == "const":
            b = self.const_val(a.dt, bshape, -1, 1)
        b = self.tame(b, 2.0)
        alpha = self.r.choice([1.0, 1.0, 0.5, 2.0, -1.0])
        beta = self.r.choice([1.0, 1.0, 0.5, -2.0])
        attrs = {}
        if trans_a:
            attrs["transA"] = 1
        if trans_b:
            attrs["transB"] = 1
        if alpha != 1.0:
            attrs["alpha"] = alpha
        if beta != 1.0 or self.r.random() < 0.2:
            attrs["beta"] = beta
        ins = [a.name, b.name]
        cb = 0.0
        if self.r.random() < 0.7:
            cshape = self.r.choice([(), (n,), (1, n), (m, 1), (m, n), (1, 1)])
            c = self.operand(a.dt, cshape, 0.2)
            ins.append(c.name)
            self.use(c)
            cb = c.bound * abs(beta)
        self.use(a, b)
        out = self.node("Gemm", ins, **attrs)
        v = self.add(out, a.dt, (m, n), abs(alpha) * a.bound * b.bound * k + cb, False, True if a.dt == F32 else a.lowp)
        return self.epilogue(v)

    def conv_input(self):
        a = self.pick_dt((F32,), lambda v: 3 <= v.rank <= 5 and numel(v.shape) <= 600)
        return self.tame(a, 2.0)

    @staticmethod
    def pooled_dim(d, k, s, dil, pb, pe, ceil_mode=False):
        eff = (k - 1) * dil + 1
        span = d + pb + pe - eff
        if span < 0:
            return 0
        return (-(-span // s) if ceil_mode else span // s) + 1

    def spatial_params(self, a, kmax=3, dil_ok=True, pool=False):
        """kernel, strides, dilations, pads (or auto_pad) for a's spatial dims, every output dim >= 1."""
        sp = a.shape[2:]
        for _ in range(30):
            ks = [self.r.randint(1, min(kmax, d + 2)) for d in sp]
            st = [self.r.choice([1, 1, 2, 3]) for _ in sp]
            dil = [self.r.choice([1, 1, 2]) if dil_ok else 1 for _ in sp]
            auto = self.r.choice(["NOTSET"] * 4 + ["SAME_UPPER", "SAME_LOWER", "VALID"])
            if auto.startswith("SAME"):
                # ORT rejects dilated Conv with SAME padding, and its pools compute another output size
                # than the spec (ceil(in / stride)) for dilated SAME windows: no dilation with SAME.
                dil = [1 for _ in sp]
                # With a stride larger than the kernel, the spec's SAME pad total
                # (ceil(in/s) - 1) * s + k - in can be negative. ORT's pools then use negative pads
                # (the windows shift inwards); nnc, ORT's own Conv and TensorFlow (where SAME comes
                # from) start at 0; the spec does not say (its reference implementation fails on
                # it). Skip those for pools.
                if pool and any((-(-d // s) - 1) * s + k - d < 0 for d, s, k in zip(sp, st, ks)):
                    continue
            if auto == "NOTSET":
                pads = [self.r.randint(0, k - 1) for k in ks] + [self.r.randint(0, k - 1) for k in ks]
            else:
                pads = None
            out = []
            for i, d in enumerate(sp):
                if auto in ("SAME_UPPER", "SAME_LOWER"):
                    out.append(-(-d // st[i]))
                else:
                    pb, pe = (pads[i], pads[i + len(sp)]) if pads else (0, 0)
                    out.append(self.pooled_dim(d, ks[i], st[i], dil[i], pb, pe))
            if all(o >= 1 for o in out):
                return ks, st, dil, auto, pads, out
        raise Skip()

    def op_conv(self):
        a = self.conv_input()
        c = a.shape[1]
        g = self.r.choice([x for x in range(1, c + 1) if c % x == 0]) if self.r.random() < 0.5 else 1
        m = g * self.r.randint(1, 3 if g > 1 else 4)
        ks, st, dil, auto, pads, osp = self.spatial_params(a)
        shape = (a.shape[0], m) + tuple(osp)
        if numel(shape) > MAX_NUMEL:
            raise Skip()
        fan = (c // g) * numel(ks)
        w = self.const_val(F32, (m, c // g) + tuple(ks), -1, 1) if self.r.random() < 0.85 else \
            self.operand(F32, (m, c // g) + tuple(ks), 1.0)
        ins = [a.name, w.name]
        bb = 0.0
        if self.r.random() < 0.6:
            b = self.const_val(F32, (m,), -1, 1)
            ins.append(b.name)
            bb = b.bound
        attrs = {}
        if self.r.random() < 0.7:
            attrs["kernel_shape"] = ks
        if any(s != 1 for s in st) or self.r.random() < 0.3:
            attrs["strides"] = st
        if any(d != 1 for d in dil) or self.r.random() < 0.2:
            attrs["dilations"] = dil
        if g != 1 or self.r.random() < 0.2:
            attrs["group"] = g
        if auto != "NOTSET":
            attrs["auto_pad"] = auto
        elif any(pads) or self.r.random() < 0.3:
            attrs["pads"] = pads
        self.use(a, w)
        out = self.node("Conv", ins, **attrs)
        v = self.add(out, F32, shape, a.bound * w.bound * fan + bb, False, True)
        if self.r.random() < 0.25:
            v = self.batchnorm(self.tame(v, 8.0))
        return self.epilogue(v)

    def op_pool(self):
        a = self.conv_input()
        op = self.r.choice(["MaxPool", "AveragePool"])
        ks, st, dil, auto, pads, osp = self.spatial_params(a, kmax=3, dil_ok=(op == "MaxPool"), pool=True)
        # ceil_mode only for MaxPool, explicit pads, and only where the last window starts inside the
        # input or its left padding: ORT and the ONNX spec versions disagree on windows that start in
        # the right padding, and on AveragePool's divisor for windows that overhang the padded end.
        ceil_mode = 0
        if op == "MaxPool" and auto == "NOTSET" and self.r.random() < 0.3:
            sp = a.shape[2:]
            ok, out2 = True, []
            for i, d in enumerate(sp):
                pb, pe = pads[i], pads[i + len(sp)]
                o = self.pooled_dim(d, ks[i], st[i], dil[i], pb, pe, ceil_mode=True)
                if (o - 1) * st[i] >= d + pb:
                    ok = False
                out2.append(o)
            if ok:
                ceil_mode, osp = 1, out2
        # A dilated window can hold padding only (pads [1, 1], kernel 2, dilation 2 on a dim of 1):
        # its max is -inf in nnc, -FLT_MAX in ORT and NaN in the onnx reference implementation; the
        # spec does not say. Every window here holds at least one input element.
        if auto == "NOTSET":
            sp = a.shape[2:]
            for i, d in enumerate(sp):
                for o in range(osp[i]):
                    if not any(0 <= o * st[i] - pads[i] + j * dil[i] < d for j in range(ks[i])):
                        raise Skip()
        attrs = {"kernel_shape": ks}
        if any(s != 1 for s in st) or self.r.random() < 0.3:
            attrs["strides"] = st
        if op == "MaxPool" and (any(d != 1 for d in dil) or self.r.random() < 0.2):
            attrs["dilations"] = dil
        if auto != "NOTSET":
            attrs["auto_pad"] = auto
        elif any(pads) or self.r.random() < 0.3:
            attrs["pads"] = pads
        if ceil_mode:
            attrs["ceil_mode"] = 1
        if op == "AveragePool" and self.r.random() < 0.5:
            attrs["count_include_pad"] = self.r.choice([0, 1])
        if op == "AveragePool" and auto in ("SAME_UPPER", "SAME_LOWER"):
            attrs["count_include_pad"] = 0  # with SAME padding ORT and the spec both count real elements only
        shape = a.shape[:2] + tuple(osp)
        self.use(a)
        out = self.node(op, [a.name], **attrs)
        return self.add(out, F32, shape, a.bound, a.exact and op == "MaxPool", a.lowp or op == "AveragePool")

    def op_cast(self):
        a = self.pick_dt(FLOATS + INTS)
        # never float -> int: a NaN or out-of-range float has no defined integer value
        targets = {F32: [F64], F64: [F32], I32: [I64, F32, F64], I64: [I32, F32, F64]}[a.dt]
        if a.dt == I64 and a.bound >= 2**31:
            targets = [F64]
        dt = self.r.choice(targets)
        self.use(a)
        out = self.node("Cast", [a.name], to=ONNX_TYPE[dt])
        lowp = a.lowp or (a.dt == F32 and not a.exact)
        return self.add(out, dt, a.shape, a.bound, a.exact, lowp)

    FAMILIES = [  # name, weight
        ("binary", 14), ("unary", 14), ("where", 3), ("compare_cast", 1), ("reduce", 6), ("softmax", 2),
        ("layernorm", 2), ("rmsnorm", 1), ("batchnorm", 1), ("transpose", 3), ("reshape", 3), ("slice", 3), ("pad", 2.5),
        ("concat", 2.5), ("split", 2), ("gather", 2.5), ("expand", 2), ("tile", 1.5), ("flatten", 1),
        ("squeeze", 2), ("matmul", 4), ("gemm", 2), ("conv", 4), ("pool", 2.5), ("cast", 2),
    ]

    def build(self):
        r = self.r
        main = r.choices([F32, F64, I32, I64], [80, 8, 6, 6])[0]
        flavour = r.random()
        n_in = r.choice([1, 1, 1, 2, 2, 3])
        for i in range(n_in):
            if main == F32 and flavour < 0.35:
                shape = self.image_shape(r.choice([4, 4, 4, 3, 5]))
            else:
                shape = self.rand_shape()
            self.pool.append(self.new_input(main if i == 0 or r.random() < 0.8 else r.choice([F32, F64, I32, I64]),
                                            shape))
        steps = r.randint(2, 9)
        names = [f for f, _ in self.FAMILIES]
        weights = [w for _, w in self.FAMILIES]
        done, tries = 0, 0
        while done < steps and tries < 200:
            tries += 1
            fam = r.choices(names, weights)[0]
            mark = (len(self.nodes), len(self.inits), len(self.inputs), len(self.pool), dict(self.input_specs),
                    [v.uses for v in self.pool], self.n_ops)
            try:
                getattr(self, "op_" + fam)()
                done += 1
            except Skip:  # roll back whatever the family emitted before it gave up
                self.nodes, self.inits, self.inputs = self.nodes[:mark[0]], self.inits[:mark[1]], self.inputs[:mark[2]]
                self.pool = self.pool[:mark[3]]
                self.input_specs = mark[4]
                for v, u in zip(self.pool, mark[5]):
                    v.uses = u
                self.n_ops = mark[6]
        outs = [v for v in self.pool if v.kind == "op" and v.uses == 0]
        extra = [v for v in self.pool if v.kind == "op" and v.uses > 0 and r.random() < 0.15]
        outs = (outs + extra)[:8]
        if not outs:  # every step was skipped: output something
            a = self.pool[-1]
            outs = [self.add(self.node("Relu" if a.dt in FLOATS else "Abs", [a.name]), a.dt, a.shape, a.bound,
                             a.exact, a.lowp)]
        self.outputs = [helper.make_tensor_value_info(v.name, ONNX_TYPE[v.dt], list(v.shape)) for v in outs]
        self.out_vals = {v.name: v for v in outs}
        # drop inputs that ended up unused (a rolled-back family may have created them)
        used = {i for n in self.nodes for i in n.input}
        self.inputs = [i for i in self.inputs if i.name in used]
        self.input_specs = {k: s for k, s in self.input_specs.items() if k in used}
        return self

    def graph(self, name="g"):
        return helper.make_graph(self.nodes, name, self.inputs, self.outputs, self.inits)

    def feeds(self):
        rng = np.random.default_rng(self.seed * 2 + 1)
        out = {}
        for name, (dt, shape, lo, hi) in self.input_specs.items():
            if dt in FLOATS:
                out[name] = rng.uniform(lo, hi, size=shape).astype(dt)
            else:
                out[name] = rng.integers(lo, hi + 1, size=shape).astype(dt)
        return out

    def tolerance(self, name):
        v = self.out_vals[name]
        if v.dt == F32 or (v.dt == F64 and v.lowp):
            return 1e-5, 1e-4
        if v.dt == F64:
            return 1e-10, 1e-8
        return 0.0, 0.0


def make_model(graph):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="difftest_ort")
    m.ir_version = 8
    return m


class Case:
    """One generated graph, its inputs and ORT's outputs."""

    def __init__(self, seed):
        self.seed = seed
        self.gen = GraphGen(seed, f"g{seed}_").build()
        self.model = make_model(self.gen.graph(f"difftest_{seed}"))
        self.feeds = self.gen.feeds()
        self.n_nodes = sum(1 for n in self.gen.nodes if n.op_type != "Constant")
        self.expected = None
        self.invalid = None

    def run_ort(self):
        try:
            onnx.checker.check_model(self.model, full_check=True)
        except Exception as e:  # noqa: BLE001 -- any checker failure is a generator bug
            self.invalid = f"onnx.checker: {str(e).strip().splitlines()[0] if str(e).strip() else e}"
            return
        try:
            self.expected = ort_session_run(self.model, self.feeds)
        except Exception as e:  # noqa: BLE001
            self.invalid = f"onnxruntime: {str(e).strip().splitlines()[0]}"
            return
        for name, arr in self.expected.items():  # the generator's shape bookkeeping must agree with ORT
            v = self.gen.out_vals[name]
            if tuple(arr.shape) != v.shape or str(arr.dtype) != v.dt:
                self.invalid = f"generator expected {name} {v.dt}{list(v.shape)}, ORT gave {arr.dtype}{list(arr.shape)}"
                return

    def keep(self, root):
        d = os.path.join(root, f"seed_{self.seed}")
        write_case_dir(d, self.model, self.feeds, self.expected)
        return d


# ---- the nnc side: compile, then run the .so through the C ABI in a forked child ------------------
NNC_MAX_RANK = 8
NP_TO_NNC = {np.dtype(np.float32): 1, np.dtype(np.int32): 6, np.dtype(np.int64): 7, np.dtype(np.bool_): 9,
             np.dtype(np.float64): 11}
NNC_TO_NP = {v: k for k, v in NP_TO_NNC.items()}


class _TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int32),
                ("shape", ctypes.c_int64 * NNC_MAX_RANK)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size_bytes", ctypes.c_size_t), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_int32), ("shape", ctypes.POINTER(ctypes.c_int64))]


class _Options(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("num_threads", ctypes.c_int32)]


def _run_so_here(so_path, feeds, threads):
    """Loads model.so, runs it on feeds (dict name -> array); returns dict name -> array."""
    lib = ctypes.CDLL(os.path.abspath(so_path))
    lib.nnc_last_error.restype = ctypes.c_char_p
    lib.nnc_model_last_error.restype = ctypes.c_char_p
    lib.nnc_model_last_error.argtypes = [ctypes.c_void_p]
    for f in (lib.nnc_model_num_inputs, lib.nnc_model_num_outputs):
        f.argtypes, f.restype = [ctypes.c_void_p], ctypes.c_size_t
    lib.nnc_model_destroy.argtypes = [ctypes.c_void_p]
    h = ctypes.c_void_p()
    opts = _Options(ctypes.sizeof(_Options), threads)
    if lib.nnc_model_create(ctypes.byref(h), ctypes.byref(opts)) != 0:
        raise RuntimeError("nnc_model_create: " + lib.nnc_last_error().decode())

    def infos(fn, count):
        res = []
        for i in range(count):
            info = _TensorInfo()
            if fn(h, ctypes.c_size_t(i), ctypes.byref(info)) != 0:
                raise RuntimeError(lib.nnc_model_last_error(h).decode())
            res.append((info.name.decode(), NNC_TO_NP[info.dtype], tuple(info.shape[: info.rank])))
        return res

    ins = infos(lib.nnc_model_input_info, lib.nnc_model_num_inputs(h))
    outs = infos(lib.nnc_model_output_info, lib.nnc_model_num_outputs(h))
    keep = []

    def tensor(arr):
        shape = (ctypes.c_int64 * NNC_MAX_RANK)(*arr.shape)
        keep.append(shape)
        return _Tensor(arr.ctypes.data, arr.nbytes, NP_TO_NNC[arr.dtype], arr.ndim,
                       ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)))

    if sorted(n for n, _, _ in ins) != sorted(feeds):
        raise RuntimeError(f"model inputs {[n for n, _, _ in ins]} differ from the graph's {sorted(feeds)}")
    in_arrays = [np.array(feeds[n], order="C", copy=True) for n, _, _ in ins]  # (ascontiguousarray makes 0-d 1-d)
    for (n, dt, shape), arr in zip(ins, in_arrays):
        if arr.dtype != dt or arr.shape != shape:
            raise RuntimeError(f"input {n}: model wants {dt}{list(shape)}, the graph has {arr.dtype}{list(arr.shape)}")
    out_arrays = [np.full(shape, 0x7b, dt) if dt != np.bool_ else np.zeros(shape, dt) for _, dt, shape in outs]
    in_t = (_Tensor * max(len(ins), 1))(*[tensor(a) for a in in_arrays])
    out_t = (_Tensor * max(len(outs), 1))(*[tensor(a) for a in out_arrays])
    if lib.nnc_model_run(h, in_t, ctypes.c_size_t(len(ins)), out_t, ctypes.c_size_t(len(outs))) != 0:
        raise RuntimeError("nnc_model_run: " + lib.nnc_model_last_error(h).decode())
    lib.nnc_model_destroy(h)
    return {n: a for (n, _, _), a in zip(outs, out_arrays)}


def run_so(so_path, feeds, threads, timeout):
    """_run_so_here in a forked child: a crash or hang in the model becomes an error message."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(rfd)
        try:
            signal.alarm(timeout)
            res = ("ok", _run_so_here(so_path, feeds, threads))
        except BaseException as e:  # noqa: BLE001
            res = ("error", str(e))
        try:
            with os.fdopen(wfd, "wb") as f:
                f.write(pickle.dumps(res))
        finally:
            os._exit(0)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        what = f"timed out after {timeout} s" if sig == signal.SIGALRM else f"crashed ({signal.Signals(sig).name})"
        return "error", f"model.so {what}"
    try:
        return pickle.loads(data)
    except Exception:  # noqa: BLE001
        return "error", "model.so run: no result from the child process"


def nnc_compile(nnc, onnx_path, so_path, level, timeout):
    try:
        p = subprocess.run([nnc, onnx_path, "-o", so_path, f"-O{level}"], capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"nnc -O{level} timed out after {timeout} s"
    if p.returncode != 0:
        msg = (p.stderr.strip() or p.stdout.strip() or f"exit code {p.returncode}").splitlines()
        return f"nnc -O{level} failed (exit {p.returncode}): " + " | ".join(msg[:3])
    return None


def compare(case, name, got):
    exp = case.expected[name]
    if got.dtype != exp.dtype or got.shape != exp.shape:
        return f"{name}: nnc gave {got.dtype}{list(got.shape)}, ORT {exp.dtype}{list(exp.shape)}"
    atol, rtol = case.gen.tolerance(name)
    if exp.dtype.kind in "iub":
        bad = got != exp
    else:
        g, e = got.astype(np.float64), exp.astype(np.float64)
        both_nan = np.isnan(g) & np.isnan(e)
        with np.errstate(invalid="ignore"):
            close = np.isfinite(e) & (np.abs(g - e) <= atol + rtol * np.abs(e))
        inf_same = np.isinf(e) & (g == e)
        bad = ~(close | both_nan | inf_same)
    if not bad.any():
        return None
    idx = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
    return (f"{name}: {int(bad.sum())}/{bad.size} elements differ (atol {atol:g}, rtol {rtol:g}); first at "
            f"{list(idx)}: nnc {got[idx]!r}, ORT {exp[idx]!r}")


def merged_model(cases):
    g = helper.make_graph([n for c in cases for n in c.model.graph.node], "difftest_batch",
                          [i for c in cases for i in c.model.graph.input],
                          [o for c in cases for o in c.model.graph.output],
                          [t for c in cases for t in c.model.graph.initializer])
    return make_model(g)


def run_nnc(cases, level, args, work):
    """Compiles+runs the cases (merged) at one level. Returns {seed: error or dict of outputs}."""
    tag = f"b{cases[0].seed}_{len(cases)}_O{level}"
    onnx_path = os.path.join(work, tag + ".onnx")
    so_path = os.path.join(work, tag + ".so")
    onnx.save(merged_model(cases) if len(cases) > 1 else cases[0].model, onnx_path)
    err = nnc_compile(args.nnc, onnx_path, so_path, level, args.timeout)
    if err is None:
        feeds = {k: v for c in cases for k, v in c.feeds.items()}
        status, res = run_so(so_path, feeds, args.threads, args.timeout)
        if status != "ok":
            err = res
    for p in (onnx_path, so_path):
        if os.path.exists(p):
            os.remove(p)
    if err is None:
        return {c.seed: {n: res[n] for n in c.expected} for c in cases}
    if len(cases) == 1:
        return {cases[0].seed: err}
    out = {}
    for c in cases:  # find which graph(s) of the batch fail
        out.update(run_nnc([c], level, args, work))
    return out


def ort_session_run(model, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def write_case_dir(d, model, feeds, expected):
    """DIR/model.onnx + test_data_set_0/{input,output}_K.pb: the layout `nnc test DIR` reads."""
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    for kind, values, arrays in (("input", model.graph.input, feeds), ("output", model.graph.output, expected)):
        for k, vi in enumerate(values if arrays is not None else []):  # (no ORT outputs: invalid graph)
            with open(os.path.join(d, "test_data_set_0", f"{kind}_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(arrays[vi.name], vi.name).SerializeToString())


def minimize(case, level, args, work, root):
    """Finds the first node (in graph order) whose output differs between nnc -O<level> and ORT and
    writes a one-node model reproducing it (non-constant inputs become graph inputs holding ORT's
    values) to ROOT/seed_S_min. Returns a line for the log."""
    m = case.model
    vi = {v.name: v for v in onnx.shape_inference.infer_shapes(m).graph.value_info}
    vi.update({v.name: v for v in m.graph.output})
    consts = {t.name for t in m.graph.initializer} | {n.output[0] for n in m.graph.node if n.op_type == "Constant"}
    pool = {v.name: v for v in case.gen.pool}

    def sub(outputs):
        g = helper.make_graph(list(m.graph.node), m.graph.name, list(m.graph.input), [vi[o] for o in outputs],
                              list(m.graph.initializer))
        return make_model(g)

    for node in m.graph.node:
        outs = [o for o in node.output if o]
        if node.op_type == "Constant" or any(o not in vi for o in outs):
            continue
        probe = Case.__new__(Case)  # the same graph with this node's outputs as the outputs
        probe.seed, probe.gen, probe.model, probe.feeds = case.seed, case.gen, sub(outs), case.feeds
        probe.expected = ort_session_run(probe.model, case.feeds)
        for o in outs:  # tolerances for intermediate values: by dtype, f64 as f64 only when known
            if o not in case.gen.out_vals:
                a = probe.expected[o]
                v = pool.get(o)
                case.gen.out_vals[o] = v or V(o, str(a.dtype), a.shape, 0, False, True)
        res = run_nnc([probe], level, args, work)[case.seed]
        bad = res if isinstance(res, str) else "; ".join(filter(None, (compare(probe, o, res[o]) for o in outs)))
        if not bad:
            continue
        need = [i for i in node.input if i and i not in consts]
        computed = [i for i in need if i not in case.feeds]
        vals = ort_session_run(sub(computed), case.feeds) if computed else {}
        vals.update({i: case.feeds[i] for i in need if i in case.feeds})
        ins = [helper.make_tensor_value_info(n, ONNX_TYPE[str(vals[n].dtype)], list(vals[n].shape)) for n in need]
        nodes = [n for n in m.graph.node if n.op_type == "Constant" and n.output[0] in node.input] + [node]
        inits = [t for t in m.graph.initializer if t.name in node.input]
        one = make_model(helper.make_graph(nodes, f"difftest_{case.seed}_min", ins, [vi[o] for o in outs], inits))
        d = os.path.join(root, f"seed_{case.seed}_min")
        write_case_dir(d, one, vals, ort_session_run(one, vals))
        return (f"  minimized: first differing node {node.op_type} '{node.name}' at -O{level} ({bad[:200]}); "
                f"one-node repro: {args.nnc} test {d} -O{level}")
    return "  minimized: no single intermediate value differs (the difference needs the whole graph)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=100, help="graphs to generate (default 100)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the first graph; graph k has seed SEED+k")
    ap.add_argument("--nnc", default=None, help="nnc binary (default build/tools/nnc)")
    ap.add_argument("--keep", metavar="DIR", help="write every graph as DIR/seed_S/model.onnx + test_data_set_0")
    ap.add_argument("--keep-failures", metavar="DIR", help="like --keep, for failing graphs only")
    ap.add_argument("--minimize", metavar="DIR", help="for each mismatch or error, write a one-node repro "
                    "(the first node whose output differs) to DIR/seed_S_min")
    ap.add_argument("--opt-levels", default="0,2", help="comma-separated nnc -O levels (default 0,2)")
    ap.add_argument("--batch", type=int, default=10, help="graphs merged into one compiled model (default 10)")
    ap.add_argument("--threads", type=int, default=1, help="nnc_options.num_threads for the model (default 1)")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per nnc compile or model run")
    ap.add_argument("-v", "--verbose", action="store_true", help="print one line per graph")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    args.nnc = args.nnc or os.path.join(root, "build", "tools", "nnc")
    if not os.access(args.nnc, os.X_OK):
        print(f"difftest_ort: error: nnc binary '{args.nnc}' not found (--nnc PATH)", file=sys.stderr)
        return 2
    levels = [int(x) for x in args.opt_levels.split(",") if x.strip()]
    t0 = time.time()
    n_graphs = n_nodes = n_mismatch = n_error = n_invalid = 0
    work = tempfile.mkdtemp(prefix="difftest_ort_")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # (so that the scratch folder is removed)
    me = os.path.relpath(os.path.abspath(__file__))

    def replay(seed):
        return f"python3 {me} --seed {seed} --count 1 --nnc {args.nnc} --keep /tmp/difftest_ort"

    try:
        seeds = list(range(args.seed, args.seed + args.count))
        for b in range(0, len(seeds), max(args.batch, 1)):
            cases = []
            for s in seeds[b:b + max(args.batch, 1)]:
                c = Case(s)
                c.run_ort()
                n_graphs += 1
                n_nodes += c.n_nodes
                if args.keep:
                    c.keep(args.keep)
                if c.invalid:
                    n_invalid += 1
                    print(f"INVALID seed {s}: {c.invalid}\n  replay: {replay(s)}", flush=True)
                    if args.keep_failures:
                        c.keep(args.keep_failures)
                    continue
                cases.append(c)
            if not cases:
                continue
            results = {c.seed: [] for c in cases}
            for level in levels:
                for seed, res in run_nnc(cases, level, args, work).items():
                    results[seed].append((level, res))
            for c in cases:
                errors, mismatches = [], []
                for level, res in results[c.seed]:
                    if isinstance(res, str):
                        errors.append(f"-O{level}: {res}")
                        continue
                    for name in c.expected:
                        m = compare(c, name, res[name])
                        if m:
                            mismatches.append(f"-O{level}: {m}")
                if errors:
                    n_error += 1
                    print(f"NNC ERROR seed {c.seed} ({c.n_nodes} nodes): " + "\n  ".join(errors) +
                          f"\n  replay: {replay(c.seed)}", flush=True)
                if mismatches:
                    n_mismatch += 1
                    print(f"MISMATCH seed {c.seed} ({c.n_nodes} nodes): " + "\n  ".join(mismatches) +
                          f"\n  replay: {replay(c.seed)}", flush=True)
                if (errors or mismatches) and args.keep_failures:
                    c.keep(args.keep_failures)
                if (errors or mismatches) and args.minimize:
                    bad_level = int((errors or mismatches)[0][2:].split(":")[0])
                    print(minimize(c, bad_level, args, work, args.minimize), flush=True)
                if args.verbose and not errors and not mismatches:
                    ops = sorted({n.op_type for n in c.gen.nodes if n.op_type != "Constant"})
                    print(f"ok seed {c.seed}: {c.n_nodes} nodes: {' '.join(ops)}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"difftest_ort: {n_graphs} graphs ({n_nodes} nodes), {n_mismatch} mismatches, {n_error} nnc errors, "
          f"{n_invalid} invalid graphs; opt levels {','.join(map(str, levels))}; {time.time() - t0:.1f} s", flush=True)
    return 1 if (n_mismatch or n_error or n_invalid) else 0


if __name__ == "__main__":
    sys.exit(main())
