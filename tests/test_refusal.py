"""Torch's ready-made attention is refused in the student's process at torch's dispatcher and in its
Python code (tfcourse/sandbox/refusal.py), before any student code runs, so that no route to it
gives a result: every name, alias, operator, overload, kernel handle and mode ends at the same
refusal, and nothing the student's code can reach undoes it.

The worker runs in a child process here (its harness, as the sandbox holds it, without the
sandbox): each case is a function defined by an exec request and called by a call request, as the
graders do, and must come back refused (not ok, the refusal's message) and reported (its
`tripwires`). Honest code must come back ok and unreported."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT, WORKER_IN_A_THREAD

HARNESS = WORKER_IN_A_THREAD + r'''
def plain(reply):
    return {"ok": reply["ok"], "tripwires": reply["tripwires"],
            "error": (reply.get("error") or {}).get("message") or ""}
started = time.process_time()
out = {"init": plain(ask("init", threads=1, forbidden=json.loads(sys.argv[2])))}
out["init_cpu"] = time.process_time() - started
out["setup"] = plain(ask("exec", label="setup", source="import torch\nfrom torch import nn\n"
                         "import torch.nn.functional as F\nq = torch.randn(2, 3, 4)\n"))
out["loading"] = plain(ask("exec", label="scratch",
                           source="F.scaled_dot_product_attention(q, q, q)"))
out["calls"] = {}
for index, (name, body) in enumerate(json.loads(sys.argv[3]).items()):
    loaded = plain(ask("exec", label=f"c{index}", source=body))
    out["calls"][name] = [plain(ask("call", fn="attack")) for _ in range(2)] if loaded["ok"] \
        else [loaded]
print(json.dumps(out))
'''

Q = "    q = torch.randn(2, 3, 4)\n"
# name -> the body of a cell that defines attack(): each tries to get torch's attention computed
ATTACKS = {
    "F.scaled_dot_product_attention": "def attack():\n" + Q +
        "    return F.scaled_dot_product_attention(q, q, q)\n",
    "an alias of torch, a method set on Tensor": (
        "_t = torch\n_T = _t.Tensor\n"
        "_op = _t.ops.aten._scaled_dot_product_attention_math\n"
        "setattr(_T, 'attend', lambda self, k, v: _op(self, k, v))\n"
        "def attack():\n" + Q + "    return q.attend(q, q)[0]\n"),
    "the math fallback's overload": "def attack():\n" + Q +
        "    return torch.ops.aten._scaled_dot_product_attention_math.default(q, q, q)[0]\n",
    "the public operator's overload": "def attack():\n" + Q +
        "    return torch.ops.aten.scaled_dot_product_attention.default(q, q, q)\n",
    "the CPU flash kernel": "def attack():\n" + Q +
        "    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu("
        "q[None], q[None], q[None])[0]\n",
    "torch._C._nn": "def attack():\n" + Q +
        "    return torch._C._nn.scaled_dot_product_attention(q, q, q)\n",
    "torch._VF": "def attack():\n" + Q +
        "    return torch._VF._scaled_dot_product_attention_math(q, q, q)[0]\n",
    "torch's private function": "def attack():\n" + Q +
        "    return torch._scaled_dot_product_attention_math(q, q, q)[0]\n",
    "under inference_mode": "def attack():\n" + Q +
        "    with torch.inference_mode():\n"
        "        return F.scaled_dot_product_attention(q, q, q).clone()\n",
    "under vmap": "def attack():\n" + Q +
        "    return torch.vmap(lambda a: F.scaled_dot_product_attention(a, a, a))(q[None])[0]\n",
    "nested tensors": "def attack():\n"
        "    n = torch.nested.nested_tensor([torch.randn(1, 3, 4), torch.randn(1, 2, 4)])\n"
        "    return F.scaled_dot_product_attention(n, n, n).to_padded_tensor(0.0)\n",
    "with autograd": "def attack():\n" + Q +
        "    return F.scaled_dot_product_attention(q.requires_grad_(), q, q).detach()\n",
    "a computed kernel's handle, called at each key": (
        "def attack():\n" + Q +
        "    for key in ('CPU', 'AutogradCPU', 'CompositeImplicitAutograd', 'XLA', "
        "'FuncTorchBatched', 'NestedTensorCPU'):\n"
        "        try:\n"
        "            kernel = torch._C._dispatch_get_computed_kernel_for_dispatch_key("
        "'aten::_scaled_dot_product_attention_math', key)\n"
        "        except Exception:\n"
        "            continue\n"
        "        try:\n"
        "            return kernel.call_boxed(torch._C._dispatch_keyset_full(), q, q, q)[0]\n"
        "        except RuntimeError as error:\n"
        "            last = error\n"
        "    raise last\n"),
    "nn.MultiheadAttention, weights computed in Python": "def attack():\n" + Q +
        "    return nn.MultiheadAttention(4, 2, batch_first=True)(q, q, q)[0]\n",
    "multi_head_attention_forward": "def attack():\n" + Q +
        "    t = q.transpose(0, 1)\n"
        "    return F.multi_head_attention_forward(t, t, t, 4, 2, torch.randn(12, 4), None, "
        "None, None, False, 0.0, torch.randn(4, 4), None)[0]\n",
    "nn.TransformerEncoderLayer": "def attack():\n" + Q +
        "    return nn.TransformerEncoderLayer(4, 2, 8, batch_first=True).eval()(q)\n",
    "the quantizable MultiheadAttention": "def attack():\n" + Q +
        "    import torch.ao.nn.quantizable as quantizable\n"
        "    return quantizable.MultiheadAttention(4, 2, batch_first=True)(q, q, q)[0]\n",
    "flex_attention's eager math": "def attack():\n" + Q +
        "    from torch.nn.attention.flex_attention import flex_attention as flex\n"
        "    return flex(q[None], q[None], q[None])[0]\n",
    "flex_attention's math, called directly": "def attack():\n" + Q +
        "    from torch._higher_order_ops.flex_attention import math_attention\n"
        "    return math_attention(q[None], q[None], q[None], lambda s, *i: s, ())[0]\n",
    "torch.onnx.ops.attention, its Python path": "def attack():\n" + Q +
        "    q4 = q[None]\n"
        "    return torch.onnx.ops.attention(q4, q4, q4, qk_matmul_output_mode=3)[0]\n",
    "the onnx custom op's own function": "def attack():\n" + Q +
        "    from torch.onnx.ops import _impl\n"
        "    return _impl.attention_23._init_fn(q[None], q[None], q[None])[0]\n",
    "the onnx operator": "def attack():\n" + Q +
        "    return torch.ops.onnx.Attention.opset23(q[None], q[None], q[None])[0]\n",
    "inductor's attention patterns, imported now": "def attack():\n" + Q +
        "    from torch._inductor.fx_passes import fuse_attention\n"
        "    return fuse_attention._sfdp_pattern_1(q, q, q, 2.0)\n",
    "torch's Python decomposition": "def attack():\n" + Q +
        "    from torch._decomp import decomposition_table as table\n"
        "    op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default\n"
        "    return table[op](q[None], q[None], q[None])[0]\n",
    "a thread pool": "def attack():\n" + Q +
        "    import concurrent.futures as futures\n"
        "    return futures.ThreadPoolExecutor(1).submit(F.scaled_dot_product_attention, "
        "q, q, q).result()\n",
    # Undoing the refusal
    "every Library object destroyed": (
        "import gc\n"
        "for thing in gc.get_objects():\n"
        "    if type(thing).__name__ in ('Library', '_DispatchModule'):\n"
        "        (getattr(thing, '_destroy', None) or thing.reset)()\n"
        "def attack():\n" + Q + "    return F.scaled_dot_product_attention(q, q, q)\n"),
    "a new library that resets itself": (
        "lib = torch._C._dispatch_library('IMPL', 'aten', '', '<x>', 0)\nlib.reset()\n"
        "def attack():\n" + Q + "    return F.scaled_dot_product_attention(q, q, q)\n"),
    "the sdp backends switched back on": (
        "torch.backends.cuda.enable_math_sdp(True)\ntorch._C._set_sdp_use_math(True)\n"
        "def attack():\n" + Q + "    return F.scaled_dot_product_attention(q, q, q)\n"),
    "the original code object looked for": (
        "import gc, types\n"
        "found = [c for o in gc.get_objects() for c in gc.get_referents(o) "
        "if isinstance(c, types.CodeType) and c.co_name == 'multi_head_attention_forward']\n"
        "F.multi_head_attention_forward.__code__ = found[0]\n"
        "def attack():\n" + Q + "    t = q.transpose(0, 1)\n"
        "    return F.multi_head_attention_forward(t, t, t, 4, 2, torch.randn(12, 4), None, "
        "None, None, False, 0.0, torch.randn(4, 4), None)[0]\n"),
}
HONEST = {
    "attention written out": "def attack():\n" + Q +
        "    return torch.softmax(q @ q.transpose(-1, -2) / 2, -1) @ q\n",
    "a linear layer and a layer norm": "def attack():\n" + Q +
        "    return nn.LayerNorm(4)(nn.Linear(4, 4)(q))\n",
    "training a step with Adam": "def attack():\n" + Q +
        "    layer = nn.Linear(4, 4)\n"
        "    optimizer = torch.optim.Adam(layer.parameters(), lr=0.1)\n"
        "    with torch.enable_grad():\n"
        "        layer(q).square().sum().backward()\n"
        "    optimizer.step()\n"
        "    return layer.weight.detach()\n",
}


@pytest.fixture(scope="module")
def worker_run(course):
    cases = {**ATTACKS, **HONEST}
    run = subprocess.run([sys.executable, "-c", HARNESS, str(ROOT / "tfcourse" / "sandbox"),
                          json.dumps(course.forbidden_names()), json.dumps(cases)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_every_route_to_torchs_attention_is_refused_and_reported(worker_run, attack):
    replies = worker_run["calls"][attack]
    if len(replies) == 1:            # the attack's cell failed while loading: it found nothing
        assert not replies[0]["ok"], replies
        return
    for reply in replies:            # the first call, and the second
        assert not reply["ok"], f"{attack}: torch's attention computed a result"
        assert "the grader refuses it" in reply["error"], reply["error"]
        assert reply["tripwires"], reply


@pytest.mark.slow
@pytest.mark.parametrize("case", list(HONEST))
def test_honest_code_is_not_refused(worker_run, case):
    assert [reply["ok"] for reply in worker_run["calls"][case]] == [True, True]
    assert [reply["tripwires"] for reply in worker_run["calls"][case]] == [[], []]


@pytest.mark.slow
def test_a_scratch_cell_stops_at_the_refused_call_and_costs_no_check(worker_run):
    assert worker_run["init"]["ok"] and worker_run["setup"]["ok"]
    assert not worker_run["loading"]["ok"]
    assert "refuses" in worker_run["loading"]["error"]
    assert worker_run["loading"]["tripwires"] == []


def test_the_refusal_goes_into_the_sandbox_beside_the_worker():
    from tfcourse.sandbox.plan import HARNESS as FILES

    assert {"worker.py", "refusal.py", "rulebook.py"} <= set(FILES)
    worker = (ROOT / "tfcourse" / "sandbox" / "worker.py").read_text()
    assert "refusal.refuse_attention(" in worker and "sys.addaudithook(" in worker
