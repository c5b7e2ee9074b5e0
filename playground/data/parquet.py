"""Reading Parquet files as Hugging Face datasets store translation data, one row group at a time (needs pyarrow).

A ``translation`` struct column of text fields named by language, text columns named by language, or exactly
two text columns. Sizes are checked from the footer before any row is read, and the text a batch decodes to is
measured before it is decoded.
"""

from __future__ import annotations

from pathlib import Path

from playground import limits
from playground.data.files import format_bytes, too_large, too_many_bytes
from playground.data.languages import COLUMN_NAMES, LANG_CODE, choose_languages
from playground.data.rows import PairFilter
from playground.errors import DataError

PARQUET_MAGIC = b"PAR1"
_BATCH_ROWS = 1_000


def read_parquet(path: Path, rows: PairFilter, src_lang: str | None, tgt_lang: str | None,
                 hint: tuple[str, str] | None, max_bytes: int) -> tuple[str | None, str | None]:
    """Add every row of a Parquet file to `rows`; return the (source, target) languages, where the file names them."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as error:
        raise DataError("Reading Parquet files needs the pyarrow package, which this server does not have: "
                        "`pip install pyarrow`, or convert the file to JSON Lines first.") from error
    try:
        parquet = pq.ParquetFile(path)
        meta = parquet.metadata
        _check_footer(meta, path.name, rows, max_bytes)
        columns, src_lang, tgt_lang = _parquet_columns(parquet.schema_arrow, pa, path.name, src_lang, tgt_lang, hint)
        _read_rows(pq, pa, path, meta.num_row_groups, columns, (src_lang, tgt_lang), rows, max_bytes)
    except (pa.ArrowException, OSError) as error:
        raise DataError(f"Cannot read {path.name} as Parquet: {error}. Write it again (e.g. with pandas' "
                        "to_parquet or datasets' to_parquet), or convert it to JSON Lines.") from error
    return src_lang, tgt_lang


def _check_footer(meta, name: str, rows: PairFilter, max_bytes: int) -> None:
    """Refuse from the footer alone a file with too many row groups, bytes or rows."""
    if meta.num_row_groups > limits.max_parquet_row_groups():  # each is read on its own: 50,000 took 16 s of CPU
        raise DataError(f"{name} is cut into {meta.num_row_groups:,} row groups; this server reads at most "
                        f"{limits.max_parquet_row_groups():,} (the operator sets PLAYGROUND_MAX_PARQUET_ROW_GROUPS). "
                        "Write it again with larger row groups (pandas' to_parquet and datasets do by default).")
    size = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    if size > max_bytes:
        raise DataError(too_many_bytes(name, max_bytes, size, " of data uncompressed"))
    rows.check_row_count(meta.num_rows)


def _read_rows(pq, pa, path: Path, row_groups: int, columns: tuple[str, ...], languages: tuple[str | None, ...],
               rows: PairFilter, max_bytes: int) -> None:
    """Add the rows batch by batch, refusing the file once the text decoded so far passes `max_bytes`."""
    struct = columns[0] == "translation"
    src_lang, tgt_lang = languages
    # dictionary-encoded columns stay encoded (a few bytes per row however long the repeated value): the footer
    # counts a dictionary value once, so the text a batch decodes to is measured, and capped, before decoding
    text = [f"translation.{src_lang}", f"translation.{tgt_lang}"] if struct else list(columns)
    parquet = pq.ParquetFile(path, read_dictionary=text)
    row, decoded = 0, 0
    batches = (batch for group in range(row_groups)  # one row group at a time: one dictionary each
               for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, row_groups=[group],
                                                 columns=[columns[0]] if struct else text))
    for batch in batches:
        sides = ([batch.column(0).field(src_lang), batch.column(0).field(tgt_lang)] if struct
                 else [batch.column(0), batch.column(1)])
        decoded += sum(_decoded_bytes(side, pa) for side in sides)
        if decoded > max_bytes:
            found = f"more than {format_bytes(max_bytes)} of text once decoded (rows 1 to {row + batch.num_rows:,})"
            raise DataError(too_large(path.name, found, format_bytes(max_bytes), "PLAYGROUND_MAX_DATA_MB"))
        for src, tgt in zip(sides[0].to_pylist(), sides[1].to_pylist()):
            row += 1
            rows.add(row, src or "", tgt or "")


def _decoded_bytes(column, pa) -> int:
    """The bytes of text a string column decodes to, from its offsets (a dictionary column: each row's value's length)
    without decoding it."""
    import pyarrow.compute as pc

    if pa.types.is_dictionary(column.type):
        lengths = pc.take(pc.binary_length(column.dictionary), column.indices)
    else:
        lengths = pc.binary_length(column)
    return int(pc.sum(lengths).as_py() or 0)


def _parquet_columns(schema, pa, name: str, src_lang: str | None, tgt_lang: str | None,
                     hint: tuple[str, str] | None) -> tuple[tuple[str, ...], str | None, str | None]:
    """(the columns to read, source language, target language): a "translation" struct of text fields, text columns
    named by language ("en", "de", …), or the only two text columns there are (source first, or named src/tgt)."""
    def is_text(data_type) -> bool:  # a dictionary of strings too (pandas' category columns write one)
        if pa.types.is_dictionary(data_type):
            data_type = data_type.value_type
        return pa.types.is_string(data_type) or pa.types.is_large_string(data_type)

    if "translation" in schema.names:
        struct = schema.field("translation").type
        text_fields = pa.types.is_struct(struct) and all(is_text(f.type) for f in struct)
        languages = [f.name for f in struct] if text_fields else []
        if len(languages) < 2:
            raise DataError(f"The \"translation\" column of {name} must hold text fields named by language "
                            "({\"en\": …, \"de\": …}), as Hugging Face datasets write it.")
        src, tgt = choose_languages(languages, src_lang, tgt_lang, f"The \"translation\" column of {name}", hint)
        return ("translation",), src, tgt
    text_columns = [f.name for f in schema if is_text(f.type)]
    by_language = [c for c in text_columns if LANG_CODE.fullmatch(c) and c.lower() not in COLUMN_NAMES]
    if len(by_language) >= 2:
        src, tgt = choose_languages(by_language, src_lang, tgt_lang, name, hint)
        return (src, tgt), src, tgt
    if len(text_columns) == 2:
        named = {c.lower(): c for c in text_columns}
        for src_name, tgt_name in (("src", "tgt"), ("source", "target"), ("input", "output")):
            if src_name in named and tgt_name in named:
                return (named[src_name], named[tgt_name]), src_lang, tgt_lang
        return tuple(text_columns), src_lang, tgt_lang
    listed = ", ".join(f"{f.name} ({f.type})" for f in schema) or "none"
    raise DataError(f"{name} has no \"translation\" column and not exactly two text columns (it has: {listed}). "
                    "Keep the source and target text columns only, or name them by language (\"en\", \"de\").")
