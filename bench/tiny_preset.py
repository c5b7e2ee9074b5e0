"""Time to a good model in the app: the `tiny` preset trained on the built-in mini-translation set for the preset's
own time budget, then the demo model's bar on the held-out pairs (exact match >= 90%, greedy).

    python bench/tiny_preset.py
"""

from __future__ import annotations

import common  # first: the allocator is chosen before PyTorch loads

from playground.core.decode import translate
from playground.core.metrics import score
from playground.data.load import load_parallel
from playground.data.stats import split_pairs
from playground.datasets.catalog import DATASETS_DIR
from playground.packages.store import load_package
from playground.training import events
from playground.training.inputs import TrainData
from playground.training.presets import preset_config
from playground.training.trainer import run_training

BAR = 0.90  # the demo model's exact-match bar (tests/unit/test_demo_model.py)


def main() -> None:
    parser = common.base_parser(__doc__.split("\n")[0], data_required=False)
    parser.add_argument("--minutes", type=float, default=None, help="time budget (default: the preset's)")
    parser.add_argument("--set", action="append", type=common.setting, default=[], metavar="KEY=VALUE",
                        help="a training setting over the preset's, e.g. --set schedule=cosine (repeatable)")
    parser.add_argument("--out", default=str(common.RESULTS_DIR / "tiny-mini-translation"), help="package folder")
    args = parser.parse_args()

    machine = common.start(args)
    cfg = preset_config("tiny", device=args.device, seed=args.seed, max_minutes=args.minutes, **dict(args.set))
    folder = DATASETS_DIR / "mini-translation"
    train, val = split_pairs(load_parallel(folder / "train.tsv").pairs, seed=args.seed)  # the CLI's default split
    held_out = load_parallel(folder / "test.tsv").pairs
    summary = None
    for event in run_training(cfg, TrainData(train, val, "en", "de", "builtin:mini-translation"), args.out):
        match event:
            case events.Eval():
                print(f"  step {event.step}: val exact match {event.exact_match:.1%}, BLEU {event.bleu:.1f}",
                      flush=True)
            case events.Error():
                raise SystemExit(f"training failed: {event.message}")
            case events.Done():
                summary = {**event.summary, "reason": event.reason}
    package = load_package(args.out)
    hyps = [t.text for t in translate(package.model, package.tokenizer, [s for s, _ in held_out])]
    exact = score(hyps, [r for _, r in held_out]).exact_match
    common.print_table(f"tiny preset on mini-translation ({summary['reason']})",
                       ["minutes", "steps", "epochs", "params", "held-out exact match", "bar"],
                       [[cfg.max_minutes, summary["steps"], summary["epochs"], summary["params"], f"{exact:.1%}",
                         f"{BAR:.0%}"]])
    print(f"{'met' if exact >= BAR else 'missed'}: {len(held_out)} held-out pairs, greedy, load average at the start "
          f"{machine['load_average_1m']}")
    common.emit_json(args, {"benchmark": "tiny_preset", "machine": machine, "settings": vars(args),
                            "training": summary, "held_out_exact_match": exact, "bar": BAR})


if __name__ == "__main__":
    main()
