"""Distillation, live (issue 42, part 3): Hinton et al.'s loss against a hand derivation on a
tiny tensor, the soft targets' entropy, a tiny run's SPEC keys, the two students on the same
batches from the same weights, the sizes and decode cost from the analysis against the modules,
and the CLI."""

import json
import math

import pytest
import torch

from llama_lab.analysis import count_params
from llama_lab.cli import main
from llama_lab.experiments import distill
from llama_lab.model import build_model

SETTINGS = distill.DistillSettings


def tiny_settings(**kw) -> distill.DistillSettings:
    base = dict(steps=3, teacher_steps=2, seeds=2, seq_len=16, batch=2, eval_every=2, eval_batches=1)
    base |= dict(teacher_d=32, teacher_layers=1, student_d=16, student_layers=1)
    return SETTINGS(**{**base, **kw})


def softmax(z: list[float], T: float) -> list[float]:
    e = [math.exp(v / T) for v in z]
    return [v / sum(e) for v in e]


def test_the_loss_by_hand_on_one_position():
    s, t, label = [1.0, 0.0, -1.0], [0.5, 2.0, 0.0], 1
    T = 2.0
    p, q = softmax(t, T), softmax(s, T)
    kl = sum(pi * math.log(pi / qi) for pi, qi in zip(p, q))  # KL(teacher ‖ student) at T
    ce = -math.log(softmax(s, 1.0)[label])
    student, teacher = torch.tensor([[s]]), torch.tensor([[t]])  # (B=1, T=1, V=3)
    targets = torch.tensor([[label]])
    assert distill.soft_target_kl(student, teacher, T).item() == pytest.approx(kl, rel=1e-6)
    for alpha in (0.0, 0.3, 1.0):
        want = alpha * T**2 * kl + (1 - alpha) * ce  # the T² scaling of the soft term
        got = distill.distillation_loss(student, teacher, targets, T, alpha).item()
        assert got == pytest.approx(want, rel=1e-6)
    # the soft term is 0 when the student is the teacher: only the labels' term is left
    same = distill.distillation_loss(teacher, teacher, targets, T, 0.5).item()
    assert distill.soft_target_kl(teacher, teacher, T).item() == pytest.approx(0.0, abs=1e-7)
    assert same == pytest.approx(0.5 * -math.log(softmax(t, 1.0)[label]), rel=1e-6)


def test_the_soft_targets_entropy_by_hand():
    t = [0.5, 2.0, 0.0]
    p = softmax(t, 2.0)
    want = -sum(pi * math.log(pi) for pi in p)
    assert distill.soft_target_entropy(torch.tensor([[t]]), 2.0) == pytest.approx(want, rel=1e-6)
    assert distill.soft_target_entropy(torch.zeros(1, 2, 256), 1.0) == pytest.approx(math.log(256))
    one_hot = torch.tensor([[[1000.0, 0.0, 0.0]]])  # a label: entropy 0
    assert distill.soft_target_entropy(one_hot, 1.0) == pytest.approx(0.0, abs=1e-6)


def test_a_tiny_run_has_the_spec_keys_and_one_val_loss_per_seed():
    r = distill.distill_run(settings=tiny_settings(temperature=2.0))
    d = r.to_dict()
    assert {"params", "val_loss"} <= set(d["teacher"])
    for student in ("student_distilled", "student_scratch"):
        assert len(d[student]["val_loss"]) == 2 and all(math.isfinite(v) for v in d[student]["val_loss"])
        assert d[student]["params"] == r.student.params
    assert r.val_step == [0, 2, 3] and d["teacher"]["steps"] == 2
    # both students start from the same weights: the same loss before any update
    assert [c[0] for c in r.distilled_val] == [c[0] for c in r.scratch_val]
    # sizes and decode cost from the analysis, checked against the modules themselves
    t_cfg, s_cfg = distill.pair_configs("seed-demo", "seed-demo", tiny_settings())
    for cost, cfg in ((r.teacher, t_cfg), (r.student, s_cfg)):
        assert cost.params == sum(p.numel() for p in build_model(cfg, device="meta").parameters())
        assert cost.params == count_params(cfg).total
    assert r.teacher.decode_flops_per_token > r.student.decode_flops_per_token
    assert r.teacher.kv_bytes_per_token > r.student.kv_bytes_per_token
    assert 0 < r.teacher_entropy_t1 < r.soft_target_entropy <= math.log(256) + 1e-6  # T = 2 softens
    assert r.soft_targets_frame()["entropy (nats)"].tolist() == [
        r.soft_target_entropy,
        r.teacher_entropy_t1,
        0.0,
        math.log(256),
    ]
    json.dumps(d)


def test_the_two_students_see_the_same_tokens(monkeypatch):
    seen: list[tuple[int, torch.Tensor]] = []
    original = distill.training_step

    def recording(trainee, inputs, targets, **kw):
        seen.append((id(trainee.model), inputs.clone()))
        return original(trainee, inputs, targets, **kw)

    monkeypatch.setattr(distill, "training_step", recording)
    distill.distill_run(settings=tiny_settings(seeds=1))
    assert len(seen) == 6  # 3 steps × (distilled, scratch)
    for (a, x), (b, y) in zip(seen[::2], seen[1::2]):
        assert a != b and torch.equal(x, y)
    assert not torch.equal(seen[0][1], seen[2][1])  # a new batch each step


def test_the_settings_refuse_a_bad_alpha():
    with pytest.raises(distill.ExperimentError, match="alpha"):
        tiny_settings(alpha=1.5).check()


@pytest.mark.parametrize(
    "argv,words",
    [
        (["--temperature", "0"], "--temperature"),
        (["--teacher", "nope"], "--teacher"),
        (["--seeds", "0"], "--seeds"),
    ],
)
def test_the_cli_refuses_a_bad_flag_in_one_line(capsys, argv, words):
    assert main(["distill", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "Traceback" not in err


def test_the_cli_prints_json_lines_then_the_result(capsys, monkeypatch):
    monkeypatch.setattr(distill, "DistillSettings", lambda **kw: tiny_settings(**{"seeds": kw["seeds"]}))
    assert main(["distill", "--steps", "3", "--seeds", "1", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["model"] == "teacher" and lines[-2]["seed"] == 0
    assert len(lines[-1]["student_distilled"]["val_loss"]) == 1


def test_the_page_default_is_shipped_with_where_it_ran():
    from llama_lab.experiments import premeasured

    d = distill.DISTILL_DEFAULTS
    entry = premeasured.lookup("distill", None, distill.page_settings(d["temperature"], d["alpha"]))
    assert entry is not None, "run tools/premeasure.py --kind distill"
    p = entry.provenance
    assert {"machine", "device", "torch", "python", "llama_lab", "date", "seconds", "flops"} <= p.keys()
    assert p["seconds"] <= 300 and p["flops"] == pytest.approx(distill.distill_flops())
    r = entry.result
    assert isinstance(r, distill.DistillRun) and r.seeds == list(range(d["seeds"])) and r.steps == d["steps"]
    assert r.teacher.params > r.student.params and r.teacher.config["n_layers"] == d["teacher_layers"]
