"""numoracle reveal: the command line over reveal_order."""

from __future__ import annotations

import json

import numpy as np

import numoracle as no
from numoracle.cli import main
from numoracle.orders import parse
from optional import available


def test_reveal_numpy_sum_prints_and_saves_the_order(tmp_path, capsys):
    out = tmp_path / "order.txt"
    assert main(["reveal", "numpy:sum", "sum", "--n", "40", "--order-out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "reproduced" in text and "calls:" in text
    order = parse(out.read_text())
    x = np.random.default_rng(3).standard_normal(40).astype(np.float32)
    assert no.simulate("sum", x, order=order) == np.sum(x)


def test_reveal_file_kernel_json(tmp_path, capsys):
    k = tmp_path / "kern.py"
    k.write_text("import numpy as np\n\ndef mm(A, B):\n    return A @ B\n")
    assert main(["reveal", f"{k}:mm", "matmul", "--shape", "2,16,3", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["verdict"] == "reproduced" and d["tree_calls"] <= 16 * 15 // 2 and d["order"].startswith("TreeOrder(")


def test_reveal_usage_errors(capsys):
    assert main(["reveal", "numpy:sum", "sum"]) == 2
    assert "--n" in capsys.readouterr().err
    assert main(["reveal", "numpy:nosuchthing", "sum", "--n", "8"]) == 2
    assert main(["reveal", "nosuchmodule_xyz:f", "sum", "--n", "8"]) == 2
    assert main(["reveal", "numpy", "sum", "--n", "8"]) == 2


def test_reveal_not_a_tree_exits_1(tmp_path, capsys):
    k = tmp_path / "fs.py"
    k.write_text("import math\nimport numpy as np\n\ndef f(x):\n    return np.float32(math.fsum(x.tolist()))\n")
    assert main(["reveal", f"{k}:f", "sum", "--n", "12"]) == 1
    assert "not a tree" in capsys.readouterr().out


def test_reveal_a_kahan_kernel_json_order_and_picture(tmp_path, capsys):
    k = tmp_path / "kahan.py"
    k.write_text("import numpy as np\n\ndef f(x):\n    s, c = x[0], np.float32(0)\n    for v in x[1:]:\n"
                 "        y = v - c\n        t = s + y\n        c = (t - s) - y\n        s = t\n    return s\n")
    out, pic = tmp_path / "order.txt", tmp_path / "tree.png"
    draw = ["--draw", str(pic)] if available("matplotlib") else []     # the picture needs numoracle[plot]
    assert main(["reveal", f"{k}:f", "sum", "--n", "24", "--json", "--order-out", str(out), *draw]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["verdict"] == "reproduced" and d["carry_calls"] > 0 and d["order"].startswith("CompensatedTree(")
    assert parse(out.read_text()) == parse(d["order"]) and (not draw or pic.stat().st_size > 0)
