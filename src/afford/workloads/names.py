"""The grammar of workload names, read without building a workload and without torch.

A typo must cost seconds, not a minute: unchecked, ``afford certify -w hf:gtp2`` would spawn
its first child and import torch and transformers before saying that ``gtp2`` is no model
type. :func:`check` reads every name a user typed, before any child starts: the
built-in names and tinylm's sizes (:func:`tinylm_size_fields`), the step options after
``+`` (:func:`parse_options`), a user workload's ``pkg.module:factory`` (the top package
must be importable; it is found, not imported) and an ``hf:`` spec (:func:`parse_spec`),
whose source must be a config file that exists or a model type transformers knows
(:func:`hf_source_error`: transformers' table of names, read from its source as text,
importing neither transformers nor torch). What it
cannot judge here passes: :func:`afford.workloads.resolve`, which builds on this grammar,
checks every name again before anything is measured.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from afford.core.errors import InputError
from afford.core.units import MAX_DIM, UnitError, whole
from afford.core.user_code import missing_module

BUILTINS = ("softmax", "scan", "tinylm")
DEFAULT = ("softmax", "scan", "tinylm")
TINYLM_PRESETS = ("q3",)  # afford.workloads.tinylm.PRESETS holds their configs

# ---------------------------------------------------------------- step options (tuned)

OPTIONS = ("fused", "foreach", "compile", "cudagraphs", "phases", "flops", "x<k>")
_CONFLICTS = (("fused", "foreach"), ("compile", "cudagraphs"), ("phases", "cudagraphs"),
              ("flops", "cudagraphs"))


def parse_options(text: str) -> tuple[str, ...]:
    """``"compile+x2"`` -> ("compile", "x2"); ``ValueError`` naming the choices."""
    opts = tuple(o.strip() for o in text.split("+"))
    for o in opts:
        if o not in OPTIONS and not re.fullmatch(r"x[1-9][0-9]{0,5}", o):  # x1 .. x999999
            raise ValueError(f"unknown step option {o!r}; options: {', '.join(OPTIONS)}")
    if len(set(opts)) != len(opts):
        raise ValueError("a step option appears twice")
    for a, b in _CONFLICTS:
        if a in opts and b in opts:
            raise ValueError(f"step options {a!r} and {b!r} cannot be combined")
    if sum(1 for o in opts if o.startswith("x")) > 1:
        raise ValueError("give one batch factor x<k>")
    return opts


# ---------------------------------------------------------------- tinylm sizes

_TINYLM_FIELD_RE = re.compile(r"([dLHbs])([0-9]+)")
TINYLM_FIELDS = {"d": "d", "L": "L", "H": "H", "b": "batch", "s": "seq"}


def tinylm_size_fields(text: str) -> tuple[str | None, dict[str, int]]:
    """``q3b16`` -> ("q3", {"batch": 16}): the preset named (or None) and the fields that
    override it. ``ValueError`` with the grammar when it cannot be read. Whether the width
    divides into the heads depends on the device's default shape: the config checks that."""
    preset = next((p for p in sorted(TINYLM_PRESETS, key=len, reverse=True)
                   if text.startswith(p)), None)
    rest = text[len(preset):] if preset else text
    pieces = _TINYLM_FIELD_RE.findall(rest)
    if "".join(k + v for k, v in pieces) != rest or (not pieces and not preset):
        raise ValueError(f"cannot read tinylm size {text!r}: write a preset "
                         f"({', '.join(TINYLM_PRESETS)}) and/or fields d<width> L<layers> "
                         "H<heads> b<batch> s<seq>, e.g. tinylm@d256L4 or tinylm@q3b16")
    seen = [k for k, _ in pieces]
    dup = sorted({k for k in seen if seen.count(k) > 1})
    if dup:
        raise ValueError(f"tinylm size {text!r}: field {dup[0]!r} given twice")
    try:
        values = {TINYLM_FIELDS[k]: whole(v, k, high=MAX_DIM) for k, v in pieces}
    except UnitError:
        raise ValueError(f"tinylm size {text!r}: every field must be a positive integer "
                         f"(at most {MAX_DIM})") from None
    return preset, values


def tinylm_preset_error(preset: str, exc: ValueError) -> InputError:
    """The error of an unreadable ``tinylm@PRESET``: the grammar's own words where the text
    looks like a size, else the presets to choose from."""
    if preset[0] in "dLHbs" or any(preset.startswith(p) for p in TINYLM_PRESETS):
        return InputError(str(exc))
    return InputError(f"unknown tinylm preset {preset!r}; presets: "
                      f"{', '.join(TINYLM_PRESETS)} (or a size such as tinylm@d256L4)")


def unknown_workload(spec: str) -> InputError:
    return InputError(f"unknown workload {spec!r}. Built-ins: {', '.join(BUILTINS)} "
                      f"(presets: {', '.join('tinylm@' + p for p in TINYLM_PRESETS)}); a "
                      "workload of your own is named as pkg.module:factory")


# ---------------------------------------------------------------- hf: specs

HF_PREFIX = "hf:"
HF_EXTRA = "pip install 'afford[hf]'"
_SIZE = re.compile(r"(?:[dLHKVF][1-9][0-9]{0,11})+")  # each at most 12 digits: 2**40 has 13
_SHAPE = re.compile(r"(?:b([1-9][0-9]{0,11}))?(?:s([1-9][0-9]{0,11}))?")
_LORA = re.compile(r"lora=r([1-9][0-9]{0,11})(?:a([1-9][0-9]{0,11}))?(?::(all-linear))?")
_FROZEN = re.compile(r"frozen=(embeddings|blocks([1-9][0-9]*))")
EXAMPLE_TYPES = ("gpt2", "llama", "mistral", "qwen2", "gemma", "phi", "opt", "gpt_neox")


@dataclass(frozen=True)
class HFSpec:
    """A parsed ``hf:`` spec; ``step_options`` are passed on to ``Tuned``."""

    source: str
    sizes: dict[str, int] = field(default_factory=dict)  # size letter -> value
    batch: int | None = None
    seq: int | None = None
    lora_rank: int | None = None
    lora_alpha: int | None = None
    lora_targets: str | None = None  # None: peft's table for the model type
    frozen: str | None = None  # "embeddings" or "blocks<k>"
    step_options: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The spec without the step options (they are Tuned's)."""
        size = "".join(f"{k}{v}" for k, v in self.sizes.items())
        opts = [o for o in (self.shape_text(), self.lora_text(),
                            f"frozen={self.frozen}" if self.frozen else "") if o]
        return HF_PREFIX + self.source + (f"@{size}" if size else "") + \
            "".join("+" + o for o in opts)

    def shape_text(self) -> str:
        return (f"b{self.batch}" if self.batch else "") + (f"s{self.seq}" if self.seq else "")

    def lora_text(self) -> str:
        if not self.lora_rank:
            return ""
        alpha = f"a{self.lora_alpha}" if self.lora_alpha else ""
        return f"lora=r{self.lora_rank}{alpha}" + (f":{self.lora_targets}"
                                                   if self.lora_targets else "")


def parse_spec(spec: str) -> HFSpec:
    """``hf:llama@d768L12+b8s1024+lora=r16+fused`` -> HFSpec; ValueError naming the fault."""
    if not spec.startswith(HF_PREFIX):
        raise ValueError(f"an hf workload starts with {HF_PREFIX!r}")
    head, *options = spec[len(HF_PREFIX):].split("+")
    source, sizes = _split_size(head)
    if not source:
        raise ValueError("name a model type (hf:gpt2) or a config.json (hf:path/config.json)")
    fields: dict[str, Any] = {"source": source, "sizes": sizes}
    step: list[str] = []
    for opt in options:
        _parse_option(opt.strip(), fields, step)
    if step:
        parse_options("+".join(step))  # fails now, in the parent, not in a child
    return HFSpec(**fields, step_options=tuple(step))


def _split_size(head: str) -> tuple[str, dict[str, int]]:
    source, at, size = head.rpartition("@")
    if not at:
        return head, {}
    if not _SIZE.fullmatch(size):
        raise ValueError(f"size {size!r}: write letters and numbers such as d768L12H12 "
                         "(d hidden, L layers, H heads, K key/value heads, V vocab, F ffn)")
    pairs = re.findall(r"([dLHKVF])([0-9]+)", size)
    letters = [k for k, _ in pairs]
    if len(set(letters)) != len(letters):
        raise ValueError(f"size {size!r}: a letter appears twice")
    return source, {k: int(v) for k, v in pairs}


def _parse_option(opt: str, fields: dict[str, Any], step: list[str]) -> None:
    shape, lora, frozen = _SHAPE.fullmatch(opt), _LORA.fullmatch(opt), _FROZEN.fullmatch(opt)
    if opt and shape and (shape.group(1) or shape.group(2)):
        _once(fields, "batch", "a shape (b<batch>s<seq>)")
        fields["batch"] = int(shape.group(1)) if shape.group(1) else None
        fields["seq"] = int(shape.group(2)) if shape.group(2) else None
    elif lora:
        _once(fields, "lora_rank", "lora=")
        fields["lora_rank"] = int(lora.group(1))
        fields["lora_alpha"] = int(lora.group(2)) if lora.group(2) else None
        fields["lora_targets"] = lora.group(3)
    elif frozen:
        _once(fields, "frozen", "frozen=")
        fields["frozen"] = frozen.group(1)
    elif opt.startswith(("lora", "frozen")):
        raise ValueError(f"option {opt!r}: write lora=r16 (lora=r16a32, lora=r16:all-linear) "
                         "or frozen=embeddings (frozen=blocks4)")
    else:
        step.append(opt)


def _once(fields: dict[str, Any], key: str, what: str) -> None:
    if key in fields:
        raise ValueError(f"{what} is given twice")


def is_config_path(source: str) -> bool:
    """An ``hf:`` source that names a config.json (or its folder), not a model type."""
    return source.endswith(".json") or "/" in source or "\\" in source or \
        Path(source).is_dir()


def unknown_model_type(source: str, known: frozenset[str] | dict) -> InputError:
    examples = ", ".join(k for k in EXAMPLE_TYPES if k in known)
    return InputError(f"hf:{source}: not a model type transformers knows (e.g. {examples}), "
                      "nor a path to a config.json")


def no_transformers() -> InputError:
    return InputError(f"hf: workloads need transformers, which is not installed here: "
                      f"{HF_EXTRA}")


TABLE_FILES = ("auto_mappings.py", "configuration_auto.py")  # transformers 5, 4.x


def _auto_folder() -> Path | None:
    """transformers' ``models/auto`` folder, found without importing transformers (its
    package import pulls in torch and, on some images, seconds of other packages); None
    where it is not a folder of source files."""
    try:
        found = importlib.util.find_spec("transformers")
    except (ImportError, ValueError):
        return None
    if found is None or not found.origin:
        return None
    folder = Path(found.origin).parent / "models" / "auto"
    return folder if folder.is_dir() else None


def table_names(text: str) -> frozenset[str]:
    """The model types of ``CONFIG_MAPPING_NAMES`` in a module's source, read as Python
    syntax and never run: the first string of every ``("type", "ClassConfig")`` pair of the
    value assigned to it (transformers writes it as ``OrderedDict([...])``); empty where the
    source assigns no such table."""
    import ast

    names: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) and node.value else []
        if not any(isinstance(t, ast.Name) and t.id == "CONFIG_MAPPING_NAMES" for t in targets):
            continue
        for pair in ast.walk(node.value):
            if isinstance(pair, ast.Tuple) and len(pair.elts) == 2 and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) for e in pair.elts):
                names.add(pair.elts[0].value)
    return frozenset(names)


def _model_type_names() -> frozenset[str] | None:
    """transformers' table of model types, read from its source as text (:func:`table_names`:
    ``models/auto/auto_mappings.py`` in transformers 5, ``configuration_auto.py`` in 4.x), so
    the check imports neither transformers nor torch; the module itself where the source
    does not read (a zipped or compiled-only install); None where neither can be read."""
    folder = _auto_folder()
    for name in TABLE_FILES if folder is not None else ():
        try:
            names = table_names((folder / name).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        if names:
            return names
    for module in ("transformers.models.auto.auto_mappings",
                   "transformers.models.auto.configuration_auto"):
        try:
            names = importlib.import_module(module).CONFIG_MAPPING_NAMES
        except Exception:  # noqa: BLE001 - a missing module or a broken install: try the next
            continue
        return frozenset(names)
    return None


def _named_by_hand(source: str) -> bool:
    """Whether ``configuration_auto``'s source names ``source`` as a quoted string: the few
    model types it adds by hand to the table (``"gpt-sw3"``, ...), read as text. True where
    the file cannot be read: the full resolve judges then."""
    folder = _auto_folder()
    try:
        text = (folder / "configuration_auto.py").read_text(encoding="utf-8")
    except (OSError, TypeError):  # no such file, or no folder: cannot tell here
        return True
    return f'"{source}"' in text


def hf_source_error(source: str) -> InputError | None:
    """Why an ``hf:`` source cannot be built from, or None: a config path that exists, a
    model type in transformers' table (or one its auto-config module adds by hand), or a
    name this check cannot judge."""
    if is_config_path(source):
        return None if Path(source).exists() else \
            InputError(f"hf:{source}: no such config file or folder")
    if importlib.util.find_spec("transformers") is None:
        return no_transformers()
    names = _model_type_names()
    if names is None or source in names or _named_by_hand(source):
        return None
    return unknown_model_type(source, names)


# ---------------------------------------------------------------- any name


def spec_error(spec: str) -> InputError | None:
    """Why ``spec`` names no workload, read from its grammar alone (module docstring), or
    None when it reads (the full resolve may still refuse it)."""
    if spec.startswith(HF_PREFIX):
        try:
            parsed = parse_spec(spec)
        except ValueError as exc:
            return InputError(f"workload {spec!r}: {exc}")
        return hf_source_error(parsed.source)
    base, plus, options = spec.partition("+")
    if plus:
        try:
            parse_options(options)
        except ValueError as exc:
            return InputError(f"workload {spec!r}: {exc}")
        return spec_error(base)
    if ":" in spec:
        return missing_module(spec)
    name, _, preset = spec.partition("@")
    if name in BUILTINS and not preset:
        return None
    if name == "tinylm":
        try:
            tinylm_size_fields(preset)
        except ValueError as exc:
            return tinylm_preset_error(preset, exc)
        return None
    return unknown_workload(spec)


def check(specs) -> None:
    """InputError for the first of ``specs`` that names no workload (:func:`spec_error`)."""
    for spec in dict.fromkeys(specs or ()):
        error = spec_error(spec)
        if error is not None:
            raise error
