"""Issue 32's rows of "cost checked before work", as a stranger replays them against a running app
(bench/shared_load.py measures another visitor's translate meanwhile). Each row is a function of the app's URL, the
attacker's gradio_client Client and a folder for its files, which it makes when missing, replayed again and again;
it returns what the attacker was answered. PREPARE runs once before a row's replays where the row needs it.
The hostile packages are the shipped demo with one file changed (bytes on disk), or, for rows C and D, untrained
models of the demo's shape with 4,096 positions and the tokenizer the row needs (random weights: no training)."""

from __future__ import annotations

import base64
import http.client
import json
import re
import threading
import zipfile
from pathlib import Path

DEMO = Path(__file__).resolve().parents[1] / "models" / "demo-en-de"
# the issue compared 5 packages with 1 M-point histories: three curves of 1 M are past the values a package file may
# hold (packages/format.py's check_containers) and refused at import; 900,000 steps are taken, and thinned as read
HISTORY_POINTS = 900_000


def demo_zip(folder: Path, name: str, change: dict[str, object]) -> Path:
    """The demo package zipped as `name`, with the files in `change` replaced (file name -> JSON value or bytes)."""
    dest = folder / f"{name}.zip"
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(DEMO.iterdir()):
            if path.is_file() and not path.name.startswith("resume"):
                value = change.get(path.name, path.read_bytes())
                zf.writestr(f"{name}/{path.name}", value if isinstance(value, bytes) else
                            json.dumps(value, separators=(",", ":")))
    return dest


def demo_json(name: str) -> dict:
    return json.loads((DEMO / name).read_text())


def post(url: str, path: str, head: bytes, declared: int, sent: int) -> str:
    """POST `head` and `sent` more bytes of a body said to be `declared` bytes long; the answer's status and text."""
    host, port = url.split("//")[1].rstrip("/").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=120)
    connection.putrequest("POST", path)
    connection.putheader("Content-Type", "application/json")
    connection.putheader("Content-Length", str(declared))
    connection.endheaders()
    try:
        connection.send(head)
        for _ in range(sent // 65536):
            connection.send(b" " * 65536)
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused before the rest was read
    try:
        answer = connection.getresponse()
        return f"{answer.status} {answer.read().decode()[:120]}"
    finally:
        connection.close()


def untrained_zip(folder: Path, name: str, spec: dict) -> Path:
    """A package of the demo's shape with 4,096 positions, random weights and the tokenizer `spec` (JSON), zipped."""
    import torch

    from playground.core.model import Transformer, TransformerConfig
    from playground.core.tokenizer import PairTokenizer
    from playground.packages.store import save_package

    tokenizer = PairTokenizer.from_json_strings(json.dumps(spec))
    shape = {**demo_json("config.json")["model"], "src_vocab_size": tokenizer.src_vocab_size,
             "tgt_vocab_size": tokenizer.tgt_vocab_size, "max_positions": 4096}
    torch.manual_seed(0)
    save_package(folder / name, Transformer(TransformerConfig(**shape)).eval(), tokenizer, src_lang="en",
                 tgt_lang="de", training={"steps": 1, "wall_s": 1.0})
    dest = folder / f"{name}.zip"
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted((folder / name).iterdir()):
            zf.write(path, f"{name}/{path.name}")
    return dest


PAIRS = [("the cat sees the dog", "die Katze sieht den Hund"), ("a dog runs", "ein Hund läuft")] * 3
# a SentencePiece charsmap whose trie claims 2**32 - 1 bytes: 🤗 tokenizers asks for 8 GB while parsing it and aborts
GARBAGE_CHARSMAP = {"type": "Precompiled",
                    "precompiled_charsmap": base64.b64encode(b"\xff\xff\xff\xff" + bytes(64)).decode()}


def byte_fallback_tokenizer() -> dict:
    """A small BPE tokenizer with byte fallback: a character it has never seen becomes its UTF-8 bytes (an emoji 4)."""
    from playground.core.tokenizer import train_tokenizer

    spec = json.loads(train_tokenizer(PAIRS, kind="bpe", vocab_size=120).to_json_strings()[0])
    vocab = spec["model"]["vocab"]
    vocab.update({f"<0x{b:02X}>": len(vocab) + b for b in range(256)})
    spec["model"]["byte_fallback"] = True
    return spec


def unbounded_wordpiece() -> dict:
    """A WordPiece tokenizer that splits a word of any length (max_input_chars_per_word 10**9, no fixed-length
    pre-tokenizer): its longest-match search costs the cube of a word's length."""
    from playground.core.tokenizer import train_tokenizer

    spec = json.loads(train_tokenizer(PAIRS, kind="wordpiece", vocab_size=120).to_json_strings()[0])
    spec["model"]["max_input_chars_per_word"] = 10**9
    steps = spec["pre_tokenizer"]["pretokenizers"]
    spec["pre_tokenizer"]["pretokenizers"] = [step for step in steps if step["type"] != "FixedLength"]
    return spec


# ----------------------------------------------------------------------------------------------------------
# The rows


def file_or_note(path, note: str) -> str:
    """A download's answer: the file's size, or, refused, the note beside it (the file is left as it was)."""
    return f"{Path(path).stat().st_size / 1e6:.1f} MB file" if isinstance(path, str) else note


def row_a(url, client, folder: Path) -> str:
    """The demo whose tokenizer.json has a Precompiled normalizer with a garbage charsmap, imported."""
    from gradio_client import handle_file

    if not (folder / "charsmap.zip").is_file():
        demo_zip(folder, "charsmap", {"tokenizer.json": dict(demo_json("tokenizer.json"), normalizer=GARBAGE_CHARSMAP)})
    return client.predict(handle_file(str(folder / "charsmap.zip")), api_name="/import_model")[0]


def translate_flood(client, model: str, line: str, lines: int = 24) -> str:
    """`lines` lines of `line` translated greedily at max output length 1 with `model`: the attacker's answer."""
    table, note, *_ = client.predict(model, "\n".join([line] * lines), "greedy", 1.0, 0, 1.0, 0, 5, 1.0, 1, 1,
                                     api_name="/translate")
    return note or f"{len(table['data'])} lines translated"


IMPORTED: dict[tuple[int, str], str] = {}  # (id of an attacker's client, package) -> the name its import got


def import_untrained(client, folder: Path, name: str, spec: dict) -> str:
    """untrained_zip imported by `client`: each visitor sees its own uploads, and a name taken gets a suffix."""
    from gradio_client import handle_file

    if not (folder / f"{name}.zip").is_file():
        untrained_zip(folder, name, spec)
    answer = client.predict(handle_file(str(folder / f"{name}.zip")), api_name="/import_model")[0]
    imported = re.search(r"Imported \*\*(.+?)\*\*", answer)
    IMPORTED[id(client), name] = imported.group(1) if imported else name
    return answer


def import_bytes(url, client, folder: Path) -> str:
    """Row C's package: the demo's shape at 4,096 positions with a byte-fallback tokenizer, imported."""
    return import_untrained(client, folder, "bytes", byte_fallback_tokenizer())


def row_c(url, client, folder: Path) -> str:
    """24 lines of 2,000 emoji (8,000 byte tokens each, cut to the 4,096 positions) at max output length 1."""
    return translate_flood(client, IMPORTED.get((id(client), "bytes"), "bytes"), "😀" * 2000)


def row_m(url, client, folder: Path) -> str:
    """Not a row of the issue: the costliest encode the limits let through, row C's flood cut to 3 lines (92 GFLOP
    of the 100 a request may take, ~1.5 s a request here)."""
    return translate_flood(client, IMPORTED.get((id(client), "bytes"), "bytes"), "😀" * 2000, lines=3)


def row_s(url, client, folder: Path) -> str:
    """Not a row of the issue: an everyday request, the demo translating 8 sentences, which a flood (--sessions
    sessions from one address, each sending it back to back) repeats."""
    table, note, *_ = client.predict("demo-en-de", "\n".join(["Two dogs are playing in the snow."] * 8), "greedy",
                                     api_name="/translate")
    return note or f"{len(table['data'])} lines translated"


def import_pieces(url, client, folder: Path) -> str:
    """Row D's package: the demo's shape at 4,096 positions with unbounded_wordpiece, imported."""
    return import_untrained(client, folder, "pieces", unbounded_wordpiece())


def row_d(url, client, folder: Path) -> str:
    """24 lines of one 2,000-letter word with row D's package (a letter of its vocabulary: a word with a character it
    lacks is one unknown token at once)."""
    return translate_flood(client, IMPORTED.get((id(client), "pieces"), "pieces"), "a" * 2000)


def row_b(url, client, folder: Path) -> None:
    """A package whose training.json holds a 2,800 x 2,800 probe, imported; then the probe slider of the demo."""
    from gradio_client import handle_file

    if not (folder / "probe.zip").is_file():
        training = demo_json("training.json")
        training["history"]["probe"] = [{"step": 1, "cross": [[[0] * 2800] * 2800], "src_tokens": ["a"] * 2800,
                                         "tgt_tokens": ["b"] * 2800}]
        demo_zip(folder, "probe", {"training.json": training})
    refused = client.predict(handle_file(str(folder / "probe.zip")), api_name="/import_model")[0]
    client.predict("demo-en-de", 0, api_name="/attention_probe")
    return refused


def row_e(url, client, folder: Path) -> None:
    """Eight request bodies of 100 MB at once."""
    answers = []
    senders = [threading.Thread(target=lambda: answers.append(post(url, "/gradio_api/queue/join", b'{"data": ["',
                                                                   100_000_000, 1 << 20))) for _ in range(8)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join()
    return answers[-1]


def row_f(url, client, folder: Path) -> None:
    """A 63 MB tokenizer, one with 200,000 added tokens, one with a vocabulary of a million, each imported."""
    from gradio_client import handle_file

    if not (folder / "vocabulary.zip").is_file():
        tokenizer = demo_json("tokenizer.json")
        big = dict(tokenizer, model=dict(tokenizer["model"], vocab={f"t{i:060d}": i for i in range(900_000)}))
        demo_zip(folder, "big", {"tokenizer.json": big})
        added = dict(tokenizer, added_tokens=[{"id": i, "content": f"<x{i}>", "single_word": False, "lstrip": False,
                                               "rstrip": False, "normalized": False, "special": True}
                                              for i in range(200_000)])
        demo_zip(folder, "added", {"tokenizer.json": added})
        vocabulary = dict(tokenizer, model=dict(tokenizer["model"], vocab={f"w{i}": i for i in range(1_000_000)}))
        demo_zip(folder, "vocabulary", {"tokenizer.json": vocabulary})
    return " | ".join(client.predict(handle_file(str(folder / f"{name}.zip")), api_name="/import_model")[0]
                      for name in ("big", "added", "vocabulary"))


def row_g(url, client, folder: Path) -> None:
    """A translate request of 20 lines x 5 MB."""
    return post(url, "/gradio_api/call/translate", b'{"data": ["demo-en-de", "', 20 * 5_000_000, 1 << 20)


def row_h(url, client, folder: Path) -> None:
    """The attention of a sentence, exported as offline HTML (plotly.js inside) 20 times."""
    client.predict("demo-en-de", "A man rides a bike.", "the model's translation", "", "cross", "one head", 0, 0,
                   api_name="/attention")
    for _ in range(20):
        answer = client.predict("cross", "one head", 0, 0, True, api_name="/export_attention_html")
    return file_or_note(*answer)


def row_i(url, client, folder: Path) -> None:
    """A FileData whose path is an http URL, sent to /load_files."""
    body = json.dumps({"data": [[{"path": "http://198.51.100.7/pairs.tsv", "meta": {"_type": "gradio.FileData"}}],
                                0.05]}).encode()
    return post(url, "/gradio_api/call/load_files", body, len(body), 0)


def row_p(url, client, folder: Path) -> str:
    """Not a row of the issue: the demo downloaded as a package zip, with its training state, and exported for
    CTranslate2 with int8 weights (with --sessions, a flood of downloads from one address)."""
    answers = [client.predict("demo-en-de", True, api_name="/export_model"),
               client.predict("demo-en-de", "int8", api_name="/export_ctranslate2")]
    return " | ".join(file_or_note(*answer) for answer in answers)


LONG = [f"long-{i}" for i in range(5)]


def import_long_histories(url, client, folder: Path) -> str:
    """Row K's five packages with histories of HISTORY_POINTS steps, imported."""
    from gradio_client import handle_file

    if not (folder / f"{LONG[-1]}.zip").is_file():
        training = demo_json("training.json")
        training["history"].update(steps=list(range(1, HISTORY_POINTS + 1)), loss=[1] * HISTORY_POINTS,
                                   lr=[0] * HISTORY_POINTS, elapsed=[])
        for name in LONG:
            demo_zip(folder, name, {"training.json": training})
    return " | ".join(client.predict(handle_file(str(folder / f"{name}.zip")), api_name="/import_model")[0]
                      for name in LONG)


def row_k(url, client, folder: Path) -> str:
    """The five packages of import_long_histories compared."""
    note, *_, loss, _, _, _, _ = client.predict(LONG, "step", api_name="/compare")
    assert not note.startswith("⚠️"), note
    return f"{len(json.loads(loss['plot'])['data'][0]['x'])} points a curve drawn"


# once before a row's replays; the others are their own preparation
PREPARE = {"C": import_bytes, "D": import_pieces, "K": import_long_histories, "M": import_bytes}
ROWS = {"A": row_a, "B": row_b, "C": row_c, "D": row_d, "E": row_e, "F": row_f, "G": row_g, "H": row_h, "I": row_i,
        "K": row_k, "M": row_m, "P": row_p, "S": row_s}
