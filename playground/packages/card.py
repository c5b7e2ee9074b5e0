"""The model card (README.md) of a package: the card saved in its folder, and the Hub's card (a metadata header,
the same body, usage snippets) that a Hub upload and a 🤗 transformers export carry. Both are built from one
PackageSummary (playground.packages.info)."""

from __future__ import annotations

import re

from playground.packages.info import PackageSummary, known, summarize
from playground.packages.scores import SCORE_WORDS, is_number, scores_text

TRANSFORMERS_DIR = "transformers"  # where the optional transformers export goes inside a Hub repo
LANGUAGE = re.compile(r"^[a-z]{2,3}([_-][A-Za-z0-9]{2,8})*$")  # "en", "de", "pt-BR", "zh_Hans": an ISO code
PLACEHOLDER_LANGUAGES = {"src", "tgt"}  # what a package says when nobody named the languages
HUB_METRICS = ("bleu", "chrf")  # the scores the Hub's metadata lists (out of 100; the loss is not a metric there)


def model_section(s: PackageSummary) -> list[str]:
    m = s.model
    return [
        "## Model",
        f"- {s.params:,} parameters; d_model {m['d_model']}, {m['n_heads']} heads, "
        f"{s.layers}, feed-forward {m['d_ff']}, {m['activation']}",
        f"- {m['positional_encoding']} positions, {m['norm_placement']}-LN, tied embeddings: {m['tie_embeddings']}",
        f"- tokenizer: {s.tokenizer_kind}, {'joint' if s.joint else 'separate'} "
        f"vocabulary of {m['src_vocab_size']:,}" + ("" if m["joint_vocab"] else f" / {m['tgt_vocab_size']:,}"),
    ]


def origin_section(s: PackageSummary) -> list[str]:
    """Where an imported model came from, under which license, and what to cite."""
    i = s.imported
    return ["", "## Origin", f"- imported from {i['origin']} ({i['architecture']}); license: {i['license']}",
            "- please cite:", *[f"  - {citation}" for citation in i["citations"]]]


def training_section(s: PackageSummary) -> list[str]:
    lines = ["", "## Training", *([f"- fine-tuned from **{s.base_words}**"] if s.base else []),
             f"- data: {known(s.data, 'user data')}, {known(s.train_pairs)} training pairs, "
             f"{known(s.val_pairs)} validation pairs",
             f"- {known(s.steps)} steps, {s.epochs:.2f} epochs, {s.wall_s:.0f} s on {known(s.device)}"]
    if s.last:
        lines.append("- final validation (the one these weights are from): " + scores_text(s.last))
    if s.best:
        metric = s.early_stop_metric
        lines.append(f"- best validation (by {SCORE_WORDS.get(metric, metric)}): " + scores_text(s.best))
    return lines


def model_card(config: dict, training: dict | None, load_from: str | None = None) -> str:
    """The card saved in the package folder; `load_from` is where its snippet loads the package from (models/NAME)."""
    s = summarize(config, training)
    lines = [f"# {s.name}", "",
             f"A Transformer encoder-decoder translating **{s.direction}**, "
             f"{'imported into' if s.imported else 'made with'} Transformer Playground.", ""]
    lines += model_section(s) + (origin_section(s) if s.imported else []) + (training_section(s) if s.trained else [])
    lines += ["", "## Use it", "", "```python", "from playground.package import load_package",
              "from playground.decode import translate", f'pkg = load_package("{load_from or "models/" + s.name}")',
              'print(translate(pkg.model, pkg.tokenizer, ["your sentence"])[0].text)', "```", ""]
    return "\n".join(lines)


def card_metadata(config: dict, training: dict | None, transformers_folder: bool, license: str | None = None):
    """huggingface_hub's ModelCardData: languages, pipeline_tag, library_name, license (only when given), metrics."""
    from huggingface_hub import EvalResult, ModelCardData

    s = summarize(config, training)
    languages = [lang for lang in (s.src_lang, s.tgt_lang)
                 if lang and LANGUAGE.match(lang) and lang not in PLACEHOLDER_LANGUAGES]
    dataset = known(s.data, "user data")
    results = [EvalResult(task_type="translation", dataset_type=dataset, dataset_name=dataset, metric_type=metric,
                          metric_value=round(float(s.best[metric]), 2))
               for metric in HUB_METRICS if is_number(s.best.get(metric))]
    return ModelCardData(
        language=languages or None, license=license or None, pipeline_tag="translation",
        library_name="transformers" if transformers_folder else "transformer-playground",
        tags=["translation", "transformer-playground"], metrics=[r.metric_type for r in results] or None,
        model_name=config["name"], eval_results=results or None)


def transformers_snippet(name: str, joint: bool, transformers_folder: bool) -> list[str]:
    """How 🤗 transformers loads the export: from the repo's root (a transformers folder) or its transformers/."""
    where = f'"{name}"' if transformers_folder else f'"{name}", subfolder="{TRANSFORMERS_DIR}"'
    decode_with = "tokenizer" if joint else "target_tokenizer"
    snippet = ["", "## Use it with 🤗 transformers", "", "```python",
               "from transformers import AutoModelForSeq2SeqLM, AutoTokenizer",
               f"model = AutoModelForSeq2SeqLM.from_pretrained({where})",
               f"tokenizer = AutoTokenizer.from_pretrained({where})"]
    if not joint:
        sub = "target_tokenizer" if transformers_folder else f"{TRANSFORMERS_DIR}/target_tokenizer"
        snippet.append(f'target_tokenizer = AutoTokenizer.from_pretrained("{name}", subfolder="{sub}")  '
                       "# separate vocabulary")
    return snippet + ['batch = tokenizer(["your sentence"], return_tensors="pt", padding=True)',
                      "out = model.generate(**batch, num_beams=5)  # num_beams=1: greedy",
                      f"print({decode_with}.batch_decode(out, skip_special_tokens=True))", "```", ""]


def hub_card(config: dict, training: dict | None, transformers_folder: bool = False, repo_id: str | None = None,
             license: str | None = None) -> str:
    """The package's model card with the Hub's metadata header and usage snippets: for this project and, for a
    transformers folder (or a repo that carries one in transformers/), for 🤗 transformers."""
    body = model_card(config, training, load_from=config["name"])
    joint = (config.get("tokenizer") or {}).get("joint", True)
    playground_use = ["", "Download the package (`huggingface_hub.snapshot_download`) and load it with this project:"
                      " `python -m playground translate --model FOLDER \"your sentence\"`.", ""]
    metadata = card_metadata(config, training, transformers_folder, license).to_yaml()
    if not license:
        metadata += "\n# license: choose one (https://huggingface.co/docs/hub/repositories-licenses) and add it here"
    carries_transformers = transformers_folder or repo_id is not None
    snippet = (transformers_snippet(repo_id or config["name"], joint, transformers_folder) if carries_transformers
               else [])
    return "---\n" + metadata + "\n---\n\n" + body + "\n".join(playground_use + snippet)
