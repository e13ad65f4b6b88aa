"""`vcpilot lint`: catch what Argo v4.1.2 would reject in a workflow file before it reaches a cluster."""

from __future__ import annotations

import difflib
import functools
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from jsonschema.exceptions import UnknownType, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing.exceptions import Unresolvable

from components import kubeyaml
from components.files import MANIFEST_MAX_BYTES, read_source, read_text, source_name
from components.untrusted import loads_json
from pipelines.lint_rules import KINDS, controller_findings

__all__ = ["SCHEMA_ENV", "Problem", "find_schema", "lint_document", "lint_files", "load_schema", "manifest_files"]

SCHEMA_ENV = "VCPILOT_ARGO_SCHEMA"
"""Environment variable naming Argo's schema.json when it is not in `../shared` next to the checkout."""

_SHARED_SCHEMA = Path(__file__).resolve().parents[2] / "shared" / "schemas" / "argo-v4.1.2" / "schema.json"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_PARAMETER = "io.argoproj.workflow.v1alpha1.Parameter"
_IMAGED = ("io.k8s.api.core.v1.Container", "io.argoproj.workflow.v1alpha1.ScriptTemplate")  # the schema requires image
_VALIDATORS: dict[tuple[int, str], tuple[dict[str, Any], Validator]] = {}
_MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")  # what `argo lint` reads of a directory, or of a path it is given


@dataclass(frozen=True)
class Problem:
    """One thing Argo would reject: in which file, where in the document, and what to do about it."""

    file: str
    path: str  # JSONPath-like, e.g. "spec.templates[2].dag.tasks[0].depends"; empty for the file as a whole
    message: str

    def __str__(self) -> str:
        text = f"{self.file}: {self.path}: {self.message}" if self.path else f"{self.file}: {self.message}"
        return re.sub(r"\s*\n\s*", " ", text)


def find_schema() -> Path | None:
    """Argo's schema.json: $VCPILOT_ARGO_SCHEMA when set, else `../shared/schemas/argo-v4.1.2/`, else None."""
    if os.environ.get(SCHEMA_ENV):
        return Path(os.environ[SCHEMA_ENV])
    return _SHARED_SCHEMA if _SHARED_SCHEMA.is_file() else None


@functools.lru_cache(maxsize=4)
def load_schema(path: Path, what: str = "schema") -> dict[str, Any]:
    """The parsed schema at `path`, read once per process: it is 600 KB.

    Read as every file we parse is (`components.files.read_text`, at most MANIFEST_MAX_BYTES): a file that cannot
    be read is an InputError naming `what` and the file; one that is not the schema a ValueError.
    """
    schema = loads_json(read_text(path, what, max_bytes=MANIFEST_MAX_BYTES))  # nested too deeply: a ValueError
    if not isinstance(schema, dict) or not isinstance(schema.get("definitions"), dict):
        raise ValueError("it has no 'definitions'")
    for name, definition in schema["definitions"].items():
        if not isinstance(definition, dict):
            raise ValueError(f"its definition {name!r} is not an object")
    return schema


def lint_files(paths: Sequence[str | Path], *, schema_path: Path | None = None) -> list[Problem]:
    """Every problem in the YAML files at `paths`; with no schema found, only the controller's rules run."""
    problems: list[Problem] = []
    schema_path = schema_path or find_schema()
    schema = None
    if schema_path is not None:
        try:
            schema = load_schema(Path(schema_path))
        except (OSError, ValueError) as error:
            reason = getattr(error, "strerror", None) or str(error)
            message = f"cannot read Argo's JSON schema ({reason}); point {SCHEMA_ENV} at Argo v4.1.2's schema.json"
            problems.append(Problem(str(schema_path), "", message))
    # As `argo lint`: a document of another kind (a ConfigMap beside a Workflow) is passed over, and only a run in
    # which no file holds anything to lint fails for it.
    foreign: list[Problem] = []
    linted = False
    for path in paths:
        found, other = _lint_file(Path(path), schema)
        problems.extend(found)
        linted |= other is None
        foreign.extend(other or [])
    return problems + (foreign if not linted else [])


def manifest_files(arguments: Sequence[str | Path]) -> tuple[list[Path], list[Problem]]:
    """The files `argo lint` reads for its arguments, and why an argument gave none.

    As Argo's `WalkManifests`: `-` is standard input; a directory gives every `.yaml`, `.yml` and `.json` file
    under it, in name order, not following linked directories; a path under `/dev/` is read whatever its name (a
    shell's `<(…)`); any other file only when its name ends so. A path that does not exist is kept, for the
    reading to say so.
    """
    files: list[Path] = []
    passed: list[Problem] = []
    for argument in arguments:
        path = Path(argument)
        if str(argument) != "-" and path.is_dir():
            found = sorted(_walk(path))
            files.extend(found)
            if not found:
                passed.append(Problem(str(path), "", "holds no .yaml, .yml or .json file, so nothing was linted"))
        elif str(argument) == "-" or str(path).startswith("/dev/") or path.suffix in _MANIFEST_SUFFIXES:
            files.append(path)
        elif path.exists():
            passed.append(
                Problem(str(path), "", "was not linted: as argo lint, only .yaml, .yml and .json files are read")
            )
        else:
            files.append(path)
    return files, passed


def _walk(directory: Path) -> Iterator[Path]:
    for entry in os.scandir(directory):
        path = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(path)
        elif path.suffix in _MANIFEST_SUFFIXES:
            yield path


def lint_document(doc: Any, *, schema: dict[str, Any] | None, file: str = "") -> list[Problem]:
    """Every problem in one parsed document: schema errors, unknown fields, then Argo's controller rules."""
    if not isinstance(doc, dict):
        return [Problem(file, "", "the document is not a mapping: expected an Argo resource with kind and spec")]
    kind = doc.get("kind")
    if kind not in KINDS:
        what = f"kind {kind!r} is not" if kind is not None else "the document has no kind; it must be"
        return [Problem(file, "kind", f"{what} one of {', '.join(KINDS)}, which are what vcpilot lint checks")]
    found: list[tuple[str, str]] = []
    validator = _validator(schema, kind) if schema is not None else None
    if validator is not None and schema is not None:
        try:
            found += [(_path(error.absolute_path), _schema_message(error)) for error in validator.iter_errors(doc)]
        # The schema itself is broken where this document leads it: a type or a `$ref` it does not define, or a
        # sub-schema neither an object nor a boolean (jsonschema then fails on it as on a bug of its own).
        except (UnknownType, Unresolvable, AttributeError, TypeError) as error:
            reason = f"{type(error).__name__.strip('_')}: {str(error).splitlines()[0]}"
            return [
                Problem(
                    file,
                    "",
                    f"Argo's JSON schema cannot check it ({reason}); point {SCHEMA_ENV} at Argo v4.1.2's schema.json",
                )
            ]
        root = schema["definitions"][f"io.argoproj.workflow.v1alpha1.{kind}"]
        found += _unknown_fields(doc, root, schema["definitions"], "")
    found += controller_findings(doc, schema_checked=validator is not None)
    return [Problem(file, path, message) for path, message in dict.fromkeys(found)]


def _lint_file(path: Path, schema: dict[str, Any] | None) -> tuple[list[Problem], list[Problem] | None]:
    """Problems of one file, and None when it held an Argo document (else the problem of having none).

    One problem for a file that cannot be read or parsed, else those of each document; a Kubernetes object of
    another kind is passed over, as `argo lint` passes it over, unless the file holds nothing else.
    """
    found = _read_documents(path)
    if isinstance(found, Problem):
        return [found], None
    named = source_name(path)
    labels = [str(named)] if len(found) == 1 else [f"{named} (document {n})" for n in range(1, len(found) + 1)]
    pairs = list(zip(labels, found, strict=True))
    ours = [(label, doc) for label, doc in pairs if not _foreign(doc)]
    problems = [problem for label, doc in ours or pairs for problem in lint_document(doc, schema=schema, file=label)]
    return (problems, None) if ours else ([], problems)


def _foreign(doc: Any) -> bool:
    """A Kubernetes object of a kind that is not Argo's (a misspelt Argo kind, or no kind at all, is ours to report)."""
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("kind"), str)
        and doc["kind"] not in KINDS
        and not str(doc.get("apiVersion") or "").startswith("argoproj.io/")
    )


def _read_documents(path: Path) -> list[Any] | Problem:
    """The YAML documents at `path` (`-`: standard input), or the one problem that keeps them from being read."""
    named = str(source_name(path))
    try:
        data = read_source(path, MANIFEST_MAX_BYTES, stdin=True)  # at most that, as every file we parse: /dev/zero ends
        if len(data) > MANIFEST_MAX_BYTES:
            return Problem(named, "", f"holds more than {MANIFEST_MAX_BYTES // 2**20} MiB, more than any manifest")
        docs = kubeyaml.load_all(data.decode("utf-8"))
    except OSError as error:
        return Problem(named, "", f"cannot read the file: {error.strerror or error}")
    except UnicodeDecodeError:
        return Problem(named, "", "cannot read the file: it is not UTF-8 text")
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        reason = getattr(error, "problem", None) or " ".join(str(error).split())  # a NUL's ReaderError: 2 lines
        return Problem(named, "", f"is not valid YAML: {reason}{where}")
    except RecursionError:
        return Problem(named, "", "is not valid YAML: it nests its values too deeply to be read")
    except (ValueError, TypeError) as error:  # a constructor's refusal: an int past Python's 4,300 digits, `!!binary`
        return Problem(named, "", f"is not valid YAML: {' '.join(str(error).split())}")
    return docs if docs else Problem(named, "", "holds no YAML document")


def _validator(schema: dict[str, Any], kind: str) -> Validator | None:
    """A validator for one kind's definition, built once per schema and kind (None when the schema lacks it)."""
    definition = f"io.argoproj.workflow.v1alpha1.{kind}"
    cached = _VALIDATORS.get((id(schema), kind))
    if cached is not None and cached[0] is schema:
        return cached[1]
    if definition not in schema["definitions"]:
        return None
    # Where the schema says string, Argo's decoder also takes a number: IntOrString (`limit: 2`), a Quantity
    # (`nvidia.com/gpu: 1`: apimachinery's UnmarshalJSON parses a number's text as it parses a string; which ones are
    # quantities pipelines/lint_leaf.py checks) and the AnyString of a parameter's value, default and enum (`value:
    # 3`, `default: true`). Loosen those, and only those.
    definitions = dict(schema["definitions"])
    definitions[_INT_OR_STRING] = {"type": ["integer", "string"]}
    definitions[_QUANTITY] = {"type": ["number", "string"]}
    if _PARAMETER in definitions:
        scalar = {"type": ["string", "number", "boolean"]}
        properties = {**definitions[_PARAMETER].get("properties", {}), "value": scalar, "default": scalar}
        properties["enum"] = {"type": "array", "items": scalar}
        definitions[_PARAMETER] = {**definitions[_PARAMETER], "properties": properties}
    # An image may come from templateDefaults: Argo's validateLeaf decides (pipelines/lint_leaf.py), not the schema.
    for name in _IMAGED:
        if name in definitions:
            required = [key for key in definitions[name].get("required", []) if key != "image"]
            definitions[name] = {**definitions[name], "required": required}
    root = {key: value for key, value in schema.items() if key not in ("oneOf", "type", "definitions")}
    root.update({"definitions": definitions, "$ref": f"#/definitions/{definition}"})
    validator: Validator = validator_for(schema)(root)
    _VALIDATORS[(id(schema), kind)] = (schema, validator)
    return validator


def _path(parts: Iterable[str | int]) -> str:
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path


def _json_type(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list", dict: "a mapping"}
    name = names.get(type(value), "null")
    return f"{name} ({value!r})" if isinstance(value, int | float | str) and len(repr(value)) < 40 else name


def _schema_message(error: ValidationError) -> str:
    """A jsonschema error as one short sentence, without dumping the offending object."""
    expected = error.validator_value
    if error.validator == "type":
        types = expected if isinstance(expected, list) else [expected]
        return f"expected {' or '.join(map(str, types))}, got {_json_type(error.instance)}"
    if error.validator == "required":
        return error.message.replace("is a required property", "is required")
    if error.validator == "const":
        return f"must be {expected!r}"
    if error.validator == "enum":
        return f"must be one of {', '.join(map(repr, expected))}"
    message = " ".join(error.message.split())
    return message if len(message) <= 160 else message[:157] + "..."


def _unknown_fields(
    value: Any, node: dict[str, Any], definitions: dict[str, Any], path: str
) -> Iterator[tuple[str, str]]:
    """Keys the schema does not declare: strict decoding rejects them, the schema lets them through."""
    while isinstance(node, dict) and "$ref" in node:
        node = definitions.get(str(node["$ref"]).rsplit("/", 1)[-1], {})
    if not isinstance(node, dict):  # a broken schema: nothing declared there
        return
    if isinstance(value, dict) and isinstance(node.get("properties"), dict):
        properties = node["properties"]
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if key in properties:
                yield from _unknown_fields(item, properties[key], definitions, where)
            else:
                close = difflib.get_close_matches(str(key), list(properties), n=1)
                yield where, f"unknown field {key!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
    elif isinstance(value, dict) and isinstance(node.get("additionalProperties"), dict):
        for key, item in value.items():
            yield from _unknown_fields(item, node["additionalProperties"], definitions, f"{path}.{key}")
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for index, item in enumerate(value):
            yield from _unknown_fields(item, node["items"], definitions, f"{path}[{index}]")
