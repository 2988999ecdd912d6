"""The house: subpackages layered one way, no import cycle, one place that tells weight sources apart, constructors
that document every keyword, the formatter and linter, and the 0.2 module paths still working."""

import ast
import inspect
import os
import subprocess
import sys
import warnings

import pytest

import keras_vit
import recipes
from keras_vit import _moved

from conftest import ROOT

PACKAGES = ("keras_vit", "recipes", "hub_export")
# keras_vit's subpackages in import order: a module may import its own subpackage and the subpackages before it
SUBPACKAGES = ("utils", "nn", "vit", "weights", "applications", "analysis")


def _modules() -> dict:
    """{dotted module name: parsed AST} of every module of the product packages."""
    found = {}
    for package in PACKAGES:
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for file in files:
                if file.endswith(".py"):
                    path = os.path.join(folder, file)
                    name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    name = name[: -len(".__init__")] if name.endswith(".__init__") else name
                    with open(path) as f:
                        found[name] = ast.parse(f.read(), path)
    return found


MODULES = _modules()


def _imports(name: str, tree: ast.AST) -> set:
    """Product modules `name` imports anywhere (module level, inside functions, under `if`): `from a import b`
    counts as importing `a.b` when that is a module, else `a`."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            targets = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module for a in node.names
            ]
        else:
            continue
        out.update(t for t in targets if t in MODULES and t != name)
    return out


GRAPH = {name: _imports(name, tree) for name, tree in MODULES.items()}


def test_the_walk_sees_every_room_and_lazy_imports():
    assert {
        "keras_vit.vit.model",
        "keras_vit.weights.load",
        "keras_vit.analysis.inspect",
        "keras_vit.utils.atomic",
        "recipes.trainer.common",
        "recipes.trainer.tf_step",
        "recipes.train",
        "hub_export.export",
    } <= set(MODULES)
    # lazy (in-function) imports count: the trainer picks its engine inside train_and_evaluate
    assert {"recipes.trainer.tf_run", "recipes.trainer.jax_run"} <= GRAPH["recipes.trainer"]


def test_no_import_cycle():
    state, cycles = {}, []

    def visit(node, path):
        state[node] = "open"
        for dep in sorted(GRAPH[node]):
            if state.get(dep) == "open":
                cycles.append(path[path.index(dep) :] + [dep])
            elif dep not in state:
                visit(dep, path + [dep])
        state[node] = "done"

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def _layer_of(module: str):
    parts = module.split(".")
    if parts[0] != "keras_vit":
        return None
    if len(parts) == 1 or parts[1] in ("_moved", "predict", "inference", "zero_shot"):
        return len(SUBPACKAGES)  # the package's face (and its short CLI paths), above every subpackage
    return SUBPACKAGES.index(parts[1])


def test_rooms_are_layered_one_way():
    wrong = []
    for module, deps in GRAPH.items():
        subpackage = _layer_of(module)
        if subpackage is None:
            continue
        for dep in deps:
            if _layer_of(dep) is None or _layer_of(dep) > subpackage:
                wrong.append(f"{module} -> {dep}")
    assert wrong == []
    assert not any(
        d.startswith(("keras_vit.weights", "keras_vit.analysis", "keras_vit.applications"))
        for m, deps in GRAPH.items()
        if m.startswith("keras_vit.vit")
        for d in deps
    )


SOURCE_SUFFIXES = (".npz", ".keras", ".weights.h5", ".safetensors")
# functions outside the source table that may look at a weight-file suffix, and why
SUFFIX_ALLOWED = {
    ("keras_vit.weights.official", "save_npz"): "checks its own output path",
    ("keras_vit.weights.safetensors_files", "save_safetensors"): "checks its own output path",
    ("keras_vit.weights.releases", "parse_augreg"): "strips .npz off an AugReg filename to name the release",
    ("keras_vit.weights.augreg", "parse_name"): "strips .npz off an AugReg filename to parse it",
}


def _suffix_tests(tree: ast.AST):
    """(function, suffix) of each `x.endswith(...)` / `x.startswith(...)` / `==` naming a weight-file suffix."""
    for function in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        for node in ast.walk(function):
            constants = []
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("endswith", "startswith"):
                constants = [c.value for a in node.args for c in ast.walk(a) if isinstance(c, ast.Constant)]
            elif isinstance(node, ast.Compare):
                constants = [c.value for c in node.comparators if isinstance(c, ast.Constant)]
            for value in constants:
                if isinstance(value, str) and value.endswith(SOURCE_SUFFIXES):
                    yield function.name, value


def test_one_table_tells_weight_sources_apart():
    """Sources are recognised by `keras_vit.weights.sources.SOURCES` alone: no other module looks at a weight
    file's suffix (but writers checking their own output path) or calls a source's recogniser, and only the
    resolver (`load`) and the `Checkpoint` record name a kind."""
    from keras_vit.weights import sources

    table = "keras_vit.weights.sources"
    found = {(m, f): s for m, tree in MODULES.items() if m != table for f, s in _suffix_tests(tree)}
    assert set(found) - set(SUFFIX_ALLOWED) == set(), found
    constants = {n.value for n in ast.walk(MODULES[table]) if isinstance(n, ast.Constant)}
    assert set(SOURCE_SUFFIXES) <= constants
    assert [s.kind for s in sources.SOURCES] == list(sources.BY_KIND)
    for predicate in ("is_release_name", "is_transformers_dir", "is_timm_dir", "is_handle"):
        callers = {
            m
            for m, tree in MODULES.items()
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", "")) == predicate
        }
        # load parses a handle before the table is asked (a malformed one fails first); safetensors_files writes;
        # open_clip and image_text_sources resolve the handles of two-tower models, which the table (image models)
        # sends there
        allowed = {
            table,
            "keras_vit.weights.load",
            "keras_vit.weights.safetensors_files",
            "keras_vit.weights.open_clip",
            "keras_vit.weights.image_text_sources",
        }
        assert callers <= allowed, (predicate, callers)
    kinds = set(sources.BY_KIND)
    naming = {
        m
        for m, tree in MODULES.items()
        for n in ast.walk(tree)
        if isinstance(n, ast.Compare)
        and any(isinstance(c, ast.Constant) and c.value in kinds for c in n.comparators)
        and any("kind" in ast.dump(side) for side in (n.left, *n.comparators))
    }
    assert naming <= {table, "keras_vit.weights.load", "keras_vit.weights.checkpoint"}, naming


ARCHITECTURE_FIELDS = {
    "patch_size",
    "hidden_size",
    "mlp_dim",
    "num_heads",
    "num_layers",
    "resnet_layers",
    "resnet_width",
}


@pytest.mark.parametrize(
    "name", [n for n in keras_vit.applications.__dict__ if n[:4] in ("ViT_", "R50_", "R26_", "R_Vi")]
)
def test_each_constructor_takes_and_documents_every_keyword(name):
    """The constructors take VisionTransformer's use keywords plus `weights` (the row gives the sizes), document
    each and every field of the record, and refuse a misspelt keyword by name."""
    from keras_vit.vit.variant import Variant

    constructor = getattr(keras_vit, name)
    want = (set(inspect.signature(keras_vit.VisionTransformer.__init__).parameters) - ARCHITECTURE_FIELDS) | {"weights"}
    have = set(inspect.signature(constructor).parameters) | {"self"}
    assert have == want
    doc = constructor.__doc__
    assert all(f"\n      {keyword}:" in doc for keyword in want - {"self", "options"}), doc
    assert all(f"\n        {field}:" in doc for field in Variant.fields()), doc
    assert constructor.__name__ == name and "Returns:" in doc
    with pytest.raises(TypeError, match="unexpected keyword argument 'qk_nrom' \\(did you mean 'qk_norm'"):
        constructor(qk_nrom=True)


def test_the_model_takes_its_sizes_use_keywords_and_one_record():
    """About 20 named parameters besides the sizes, no family switch among them: the record carries those."""
    from keras_vit.vit.variant import Variant

    named = set(inspect.signature(keras_vit.VisionTransformer.__init__).parameters) - {"self", "options"}
    assert len(named - ARCHITECTURE_FIELDS) <= 21, sorted(named)
    assert not named & set(Variant.fields())
    doc = keras_vit.VisionTransformer.__doc__
    assert all(f"\n        {field}:" in doc for field in Variant.fields()), doc


def test_help_of_a_constructor_shows_dtype_trainable_and_remat():
    import pydoc

    import keras_vit

    text = pydoc.render_doc(keras_vit.ViT_B16, renderer=pydoc.plaintext)  # what help() pages
    for keyword in ("dtype=None", "trainable: 'bool' = True", "remat: 'Union[bool, str]' = False", "weights=None"):
        assert keyword in text


def test_docs_development_names_every_module():
    """docs/development.md maps the code: a module missing from its tables fails here."""
    with open(os.path.join(ROOT, "docs", "development.md")) as f:
        text = f.read()
    paths = sorted(
        os.path.relpath(os.path.join(folder, file), ROOT)
        for package in PACKAGES
        for folder, _, files in os.walk(os.path.join(ROOT, package))
        for file in files
        if file.endswith(".py")
    )
    assert [p for p in paths if f"`{p}`" not in text] == []


def test_docs_list_the_records_fields_as_the_record_does():
    """docs/models.md's table of the record's fields is written from the record (tools/make_docs_tables.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "make_docs_tables", os.path.join(ROOT, "tools", "make_docs_tables.py")
    )
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    with open(tool.PAGE) as f:
        text = f.read()
    assert tool.rendered(text) == text, "run python tools/make_docs_tables.py"


def test_the_formatter_and_linter_pass():
    """ruff's format and lint rules (pyproject.toml) instead of line caps: files split where a concept ends."""
    ruff = os.path.join(os.path.dirname(sys.executable), "ruff")
    if not os.path.exists(ruff):
        pytest.skip("ruff is in the test extra (make test installs it)")
    for command in ([ruff, "check", "."], [ruff, "format", "--check", "."]):
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]


def test_product_code_cites_only_documents_of_the_repository():
    import re

    hits = []
    for package in PACKAGES:
        found = subprocess.run(
            ["grep", "-rnE", r"REFERENCE ?§|[Ii]ssue [0-9]+", package, "--include=*.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.splitlines()
        hits += [h for h in found if not re.search(r"keras-team/keras#|#[0-9]+\)", h)]
    assert hits == []
    assert os.path.exists(os.path.join(ROOT, "docs", "reference.md"))


MOVED = {**_moved.MOVED, **recipes.MOVED}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_module_paths_forward_with_a_deprecation_warning(old):
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = __import__(old, fromlist=["_"])
    assert any(issubclass(w.category, DeprecationWarning) and old in str(w.message) for w in caught)
    new = __import__(MOVED[old][0], fromlist=["_"])
    public = [n for n in dir(new) if not n.startswith("_") and not isinstance(getattr(new, n), type(sys))][:5]
    assert all(getattr(module, n) is getattr(new, n) for n in public)


def test_the_names_users_called_in_0_2_still_resolve():
    from keras_vit.checkpoints import available, load_npz  # 0.2's checkpoints held the registry too
    from keras_vit.loading import load_model, source_params
    from keras_vit.models import VisionTransformer, create_model

    assert (available, load_npz, load_model, source_params) == (
        keras_vit.weights.releases.available,
        keras_vit.load_npz,
        keras_vit.load_model,
        keras_vit.weights.source_params,
    )
    assert (VisionTransformer, create_model) == (keras_vit.VisionTransformer, keras_vit.create_model)
    assert keras_vit.checkpoints.available() and keras_vit.layers.MultiHeadDotProductAttention
    with pytest.warns(DeprecationWarning, match="vit_config"):
        assert keras_vit.get_config("ViT-B_16") is keras_vit.vit_config("ViT-B/16")
    with pytest.warns(DeprecationWarning, match="check_source"):
        assert keras_vit.weights.check_weights_argument(None) is None


def test_python_m_old_inspect_path_still_runs(monkeypatch, capsys):
    """`python -m keras_vit.inspect --help` (0.2's path), run as `-m` runs it: runpy with `__main__`."""
    import runpy

    monkeypatch.setattr(sys, "argv", ["keras_vit.inspect", "--help"])
    with pytest.warns(DeprecationWarning), pytest.raises(SystemExit) as done:
        runpy.run_module("keras_vit.inspect", run_name="__main__", alter_sys=True)
    assert done.value.code in (0, None) and "keras_vit.analysis.inspect" in capsys.readouterr().out
