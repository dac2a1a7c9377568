"""The documentation's generated pages are the data's: the results pages and the README's
results table regenerate from the committed CSVs with no difference, a data set's
columns are the documented ones, the API reference lists each layer's ``__all__``, and
the site's configuration names the pages it builds."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


def script(path: str) -> ModuleType:
    """Import one of the documentation's scripts by its path."""
    spec = importlib.util.spec_from_file_location(Path(path).stem + "_under_test", ROOT / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def results() -> ModuleType:
    return script("docs/results/generate.py")


def test_the_results_pages_and_the_readme_table_are_their_data_s(results: ModuleType,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Regenerating every results page and the README's table changes nothing."""
    assert results.main(["--check"]) == 0, capsys.readouterr().err


def test_a_stale_page_is_named(results: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    """A page that differs from its data is reported by path, and --check writes nothing."""
    monkeypatch.setattr(results, "WRITERS", {"speed.md": lambda: "# Speed\n"})
    monkeypatch.setattr(results, "PAGES", tmp_path)
    monkeypatch.setattr(results, "ROOT", tmp_path)
    monkeypatch.setattr(results, "README", tmp_path / "README.md")
    (tmp_path / "README.md").write_text(f"x\n{results.README_START}\nold\n{results.README_END}\ny\n")
    monkeypatch.setattr(results, "readme_table", lambda: "| a |\n|---|\n| 1 |\n")
    (tmp_path / "speed.md").write_text("# Speed\n")
    assert results.main(["--check"]) == 1
    assert capsys.readouterr().err == ("generate: README.md differs from its data: run python "
                                       "docs/results/generate.py\n")  # fmt: skip
    assert (tmp_path / "README.md").read_text().count("old") == 1
    assert results.main([]) == 0
    assert (tmp_path / "README.md").read_text() == (f"x\n{results.README_START}\n| a |\n|---|\n| 1 |\n"
                                                    f"{results.README_END}\ny\n")  # fmt: skip


def test_a_data_set_must_have_its_documented_columns(results: ModuleType, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A CSV whose columns differ from its TOML's list is refused, naming both files."""
    monkeypatch.setattr(results, "DATA", tmp_path / "data")
    monkeypatch.setattr(results, "ROOT", tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "s.csv").write_text("nodes,cpu_s\n10,0.5\n")
    meta = 'title = "t"\nmachine = "m"\ncommand = "c"\ndate = "d"\nabout = "a"\n[columns]\nnodes = "n"\n'
    (tmp_path / "data" / "s.toml").write_text(meta)
    with pytest.raises(results.ResultsError, match=r"^generate: data/s.csv has columns \['nodes', 'cpu_s'\], "
                                                   r"data/s.toml documents \['nodes'\]$"):  # fmt: skip
        results.read_set("s")
    (tmp_path / "data" / "s.toml").write_text(meta + 'cpu_s = "seconds"\n')
    data = results.read_set("s")
    assert data.rows.to_dict("list") == {"nodes": [10], "cpu_s": [0.5]}
    assert data.provenance() == "- machine: m\n- command: `c`\n- date: d\n- data: `docs/results/data/s.csv`\n"
    assert data.columns() == "| column | meaning |\n|---|---|\n| `nodes` | n |\n| `cpu_s` | seconds |\n"
    (tmp_path / "data" / "s.toml").write_text('title = "t"\n[columns]\nnodes = "n"\n')
    with pytest.raises(results.ResultsError, match=r"lacks machine, command, date, about$"):
        results.read_set("s")


def test_markdown_tables_show_missing_values_as_empty_cells(results: ModuleType) -> None:
    df = pd.DataFrame({"a": [1.5, None], "b": ["x|y", "z"]})
    assert results.markdown_table(df) == "| a | b |\n|---|---|\n| 1.5 | x\\|y |\n|  | z |\n"


def test_the_validation_summary_is_computed_per_group(results: ModuleType) -> None:
    """Two plans of one model: 2 % and 8 % off, one inside its band."""
    table = pd.DataFrame({"run": ["a", "a", "a"], "model": ["m", "m", "m"], "status": ["ok", "ok", "failed"],
                          "error_pct": [2.0, -8.0, None], "in_band": [False, True, None],
                          "kendall_tau": [0.5, 0.5, None]})  # fmt: skip
    row = results.validation_summary(table, "run").iloc[0].to_dict()
    assert row == {"run": "a", "plans": 2, "mean abs error %": "5.0", "max abs error %": "8.0",
                   "inside band or within 5 % (%)": "100", "Kendall tau": "m 0.50"}  # fmt: skip


def test_the_gpu_error_table_has_a_column_per_cost_model_and_their_mean(results: ModuleType) -> None:
    """Two rows priced by two cost models: signed errors, then the mean |error| per model."""
    frame = pd.DataFrame({"model": ["m", "m", "m", "m"], "batch": [1, 1, 2, 2], "gpu": ["g"] * 4,
                          "cost": ["default", "roofline", "default", "roofline"],
                          "error_pct": [2.0, -10.0, -4.0, 30.0]})  # fmt: skip
    assert results.error_table(frame).values.tolist() == [["m", 1, "g", "+2.0", "-10.0"],
                                                          ["m", 2, "g", "-4.0", "+30.0"],
                                                          ["mean abs", "", "", "3.0", "20.0"]]  # fmt: skip


def test_the_llamacpp_errors_count_a_failed_row_at_100_percent(results: ModuleType) -> None:
    """Errors are fractions; a failed row has a reason and no error, and counts at 100 %."""
    rows = pd.DataFrame({"backend": ["cuda"] * 3 + ["cpu"], "test": ["tg", "tg", "tg", "pp"],
                         "error": [0.1, -0.3, None, 0.05], "rule_error": [0.2, 0.2, None, None],
                         "failed": [None, None, "no preset", None], "source_id": ["a", "b", "c", "c"],
                         "fold": [0, 1, 2, 2]})  # fmt: skip
    errors = results.llamacpp_errors(rows)
    assert errors.loc[("cuda", "tg")].tolist() == [3, 1, pytest.approx(140 / 3), pytest.approx(30.0),
                                                   pytest.approx(100.0), pytest.approx(140 / 3)]
    assert errors.loc[("cpu", "pp"), "mean"] == pytest.approx(5.0)
    overall = results.llamacpp_overall(rows)
    assert overall["failed"] == 1 and overall["folds"] == 3 and overall["tg"] == pytest.approx(140 / 3)


def test_every_data_set_documents_its_columns_and_provenance(results: ModuleType) -> None:
    names = sorted(p.stem for p in (ROOT / "docs" / "results" / "data").glob("*.csv"))
    assert names == ["gpu_compare", "scheduler_speed", "sim_speed", "validation_cpu2_runs"]
    for name in names:
        assert results.read_set(name).meta["date"]


def test_the_api_reference_lists_each_layer_s_public_names(capsys: pytest.CaptureFixture[str]) -> None:
    """``docs/reference/generate_api.py --check``: the pages are those the layers' ``__all__`` give."""
    assert script("docs/reference/generate_api.py").main(["--check"]) == 0, capsys.readouterr().err


def test_every_page_is_in_a_toctree() -> None:
    """Every Markdown page of docs/ is listed by name in its folder's index (a page in no
    toctree is an orphan the reader never reaches), and the root lists each section."""
    for folder in ("guide", "howto", "results"):
        index = (ROOT / "docs" / folder / "index.md").read_text()
        if ":glob:" in index and re.search(r"^\*$", index, flags=re.M):
            continue  # every page of the folder
        for page in sorted((ROOT / "docs" / folder).glob("*.md")):
            if page.stem != "index":
                assert re.search(rf"^{re.escape(page.stem)}$", index, flags=re.M), f"{folder}/{page.name}"
    for page in ["guide/index", "howto/index", "results/index", "reference/cli", "reference/api/index",
                 "architecture"]:  # fmt: skip
        assert re.search(rf"^{re.escape(page)}$", (ROOT / "docs" / "index.md").read_text(), flags=re.M), page


def test_no_help_text_of_the_command_reference_renders_as_an_e_mail_address() -> None:
    """``validate``'s help says ``cpu -> cpu@threads``: reStructuredText read it as an
    address and the command reference showed a mailto link."""
    from docutils.core import publish_parts

    sys.path.insert(0, str(ROOT / "docs" / "reference"))
    try:
        parser = script("docs/reference/cli_parser.py").reference_parser()
    finally:
        sys.path.remove(str(ROOT / "docs" / "reference"))
    texts, stack = [], [parser]
    while stack:
        p = stack.pop()
        texts.append(p.description or "")
        for action in p._actions:
            texts.append(action.help or "")
            if hasattr(action, "choices") and isinstance(action.choices, dict):
                stack.extend(action.choices.values())
    assert any("cpu\\@threads" in t for t in texts)
    for text in texts:
        html = publish_parts(text.replace("%%", "%"), writer="html")["body"]
        assert "mailto:" not in html, text
