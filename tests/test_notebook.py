"""notebooks/layout_analysis.ipynb runs headless, top to bottom, on a tiny budget."""

import pathlib
import shutil

import nbformat
from nbclient import NotebookClient

NOTEBOOK = pathlib.Path(__file__).resolve().parent.parent / "notebooks" / "layout_analysis.ipynb"


def test_layout_analysis_notebook_executes(tmp_path, monkeypatch, resnet18_records):
    shutil.copyfile(resnet18_records, tmp_path / "nb.records.jsonl")  # the notebook's settings
    monkeypatch.setenv("GT_NB_IMAGE_SIZE", "32")
    monkeypatch.setenv("GT_NB_MAX_CANDIDATES", "2")
    monkeypatch.setenv("GT_NB_MIN_REPEAT_MS", "1")
    monkeypatch.setenv("GT_NB_RECORDS", str(tmp_path / "nb.records.jsonl"))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "predicted" in text and "optimal" in text and "| total |" in text
    figures = [o for o in outputs if o.output_type == "display_data" and "image/png" in o.data]
    assert len(figures) == 4
