"""Int8 linear layers for CPU decoding (core/quantize.py): a copy that translates as the fp32 model does, with int8
weights, leaving the model it came from untouched."""

from __future__ import annotations

import json

import torch
from helpers import DEMO

from playground.core.decode import DecodeOptions, translate
from playground.core.quantize import int8_linears
from playground.datasets.catalog import DATASETS_DIR
from playground.packages.store import load_package

TEST_TSV = DATASETS_DIR / "mini-translation" / "test.tsv"
SENTENCES = [line.split("\t")[0] for line in TEST_TSV.read_text("utf-8").splitlines()[1:61]]


def test_the_int8_copy_translates_as_the_fp32_model_does(one_thread):
    package = load_package(DEMO)
    before = {name: weight.clone() for name, weight in package.model.state_dict().items()}
    quantized = int8_linears(package.model)
    linears = [m for m in quantized.modules() if isinstance(m, torch.ao.nn.quantized.dynamic.Linear)]
    assert len(linears) == sum(isinstance(m, torch.nn.Linear) for m in package.model.modules())
    assert all(m.weight().dtype == torch.qint8 for m in linears)
    for method in ("greedy", "beam"):
        fp32 = translate(package.model, package.tokenizer, SENTENCES, DecodeOptions(method))
        int8 = translate(quantized, package.tokenizer, SENTENCES, DecodeOptions(method))
        same = sum(a.text == b.text for a, b in zip(fp32, int8))
        assert same >= 0.9 * len(SENTENCES), [(a.text, b.text) for a, b in zip(fp32, int8) if a.text != b.text]
    assert all(torch.equal(before[name], weight) for name, weight in package.model.state_dict().items())
    assert all(isinstance(m, torch.nn.Linear) for m in (package.model.output, package.model.decoder[0].ff.up))


def test_the_cli_evaluates_with_int8_weights_as_with_fp32(tmp_path, capsys, one_thread):
    from playground.cli.main import main

    rows = [line.split("\t") for line in TEST_TSV.read_text("utf-8").splitlines()[1:61]]
    (tmp_path / "src.txt").write_text("\n".join(s for s, _ in rows) + "\n", encoding="utf-8")
    (tmp_path / "ref.txt").write_text("\n".join(r for _, r in rows) + "\n", encoding="utf-8")
    evaluate = ["evaluate", "--model", str(DEMO), "--src", str(tmp_path / "src.txt"),
                "--ref", str(tmp_path / "ref.txt"), "--json"]
    bleu = {}
    for weights, flags in (("fp32", []), ("int8", ["--int8"])):
        assert main([*evaluate, *flags]) == 0
        bleu[weights] = json.loads(capsys.readouterr().out)["bleu"]
    assert bleu["fp32"] > 80 and abs(bleu["int8"] - bleu["fp32"]) < 1.0, bleu
