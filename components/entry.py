"""The front door every command shares: the one place where a command's end becomes its output and exit code.

`vcpilot X`, `python -m components.X` (a pod's command) and a test's `CliRunner` all end here, through `Group` and
`Command` (the click classes of every vcpilot app) or `run`, so a person, a pod and a test see the same contract
(README.md, "Errors and exit codes"):

* a `VcpilotError` is `error: <one sentence>` on stderr and its exit code (`components.errors`: 1 for bad input);
* a usage error (an unknown option, a value of the wrong type, a missing argument) is one sentence too, naming the
  option as it is typed, and exit code 2 — never click's usage box;
* with `--json` on the command line, an error is also a JSON object on stdout, `{"error": …, "exit_code": …}`,
  so stdout always holds exactly one JSON document;
* never a traceback: a bug is one sentence that says so, unless `--debug` or `VCPILOT_DEBUG=1` asks for it.

A command's body only raises: `raise InputError("…")` (or its area's error) and lets this module speak.
"""

from __future__ import annotations

import difflib
import errno
import importlib
import importlib.util
import inspect
import json
import os
import re
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, ParamSpec, TypeVar

import typer
from typer._click import core as click_core
from typer._click import exceptions as click_exceptions
from typer._click import globals as click_globals
from typer._click import utils as click_utils
from typer.core import TyperCommand, TyperGroup

from components.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, InputError, VcpilotError, explain
from components.redact import RedactingFilter, redact_text

if TYPE_CHECKING:
    from pydantic import ValidationError
    from typer._click.formatting import HelpFormatter

__all__ = [
    "CONTEXT_SETTINGS",
    "DEBUG_ENV",
    "Command",
    "Group",
    "JsonOption",
    "LazyGroup",
    "confirm",
    "enable_debug",
    "flag_name",
    "given_options",
    "invoke",
    "lazy_group",
    "new_app",
    "option_error",
    "print_json",
    "reported",
    "run",
]

DEBUG_ENV = "VCPILOT_DEBUG"  # set to 1: an error shows its traceback too
# `-h` beside `--help` everywhere: the children of a context inherit its help option names.
CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}

JsonOption = Annotated[
    bool, typer.Option("--json", help="Print one JSON document on stdout (on error: {error, exit_code}).")
]

_P = ParamSpec("_P")
_R = TypeVar("_R")

_debug = False  # this invocation's --debug (the root command's callback sets it)


class _BoolHelp:
    """The help flag defaults to False, so that a command that needs no pydantic does not import it.

    Typer builds a pydantic adapter (importing pydantic, ~0.1 s) for a flag whose value is not a bool, and its own
    help flag has no default.
    """

    def get_help_option(self, ctx: click_core.Context) -> Any:
        """The `-h`/`--help` flag, False when absent."""
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None and option.default is None:
            option.default = False
        return option


class _Invoked:
    """`main` of a vcpilot click group or command: what a process or a test starts goes through `invoke`."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """What a process or a test starts: `invoke`, ending the process with its exit code."""
        if not standalone_mode:  # a caller that wants click's exceptions gets them
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)  # type: ignore[misc]
        sys.exit(invoke(self, args, prog_name, complete_var=complete_var, **extra))  # type: ignore[arg-type]


class _NoEmptyPaths:
    """A path option or argument given as '' is a usage error: typer reads it as `.`, the working directory.

    `compile --out ''` wrote into the working directory, `cluster submit ''` said "is a directory".
    """

    def parse_args(self, ctx: click_core.Context, args: list[str]) -> list[str]:
        """Refuse an empty path before typer coerces it, then parse as click does."""
        if any(arg == "" or arg.endswith("=") for arg in args):  # '' or `--out=`
            given, _, _ = self.make_parser(ctx).parse_args(args=list(args))  # type: ignore[attr-defined]
            for param in self.get_params(ctx):  # type: ignore[attr-defined]
                value = given.get(param.name)
                values = value if isinstance(value, (list, tuple)) else [value]
                descriptor = getattr(param, "type_descriptor", None)
                if "" in values and descriptor is not None and descriptor.is_path:
                    raise click_exceptions.BadParameter("empty: give a path", ctx=ctx, param=param)
        return super().parse_args(ctx, args)  # type: ignore[misc,no-any-return]


class Group(_BoolHelp, _Invoked, TyperGroup):
    """The click group of every vcpilot app with sub-commands."""


class Command(_NoEmptyPaths, _BoolHelp, _Invoked, TyperCommand):
    """The click command of a vcpilot app of one command (typer collapses those into the command itself)."""


# A command of a LazyGroup: a sub-app, a command's function, or "module:attribute" naming one.
LazyTarget = typer.Typer | Callable[..., Any] | str


class LazyGroup(Group):
    """A group whose commands are built (typer reads every parameter of a command) only when one is named.

    Building the whole `vcpilot` tree costs more than importing typer; `vcpilot --help` needs only each command's
    first docstring line, and `vcpilot cluster status` only the cluster's commands. A command given as
    "module:attribute" is not even imported until it is named (or `--help` lists it). `lazy_group` makes one.
    """

    lazy: ClassVar[dict[str, LazyTarget]] = {}

    def list_commands(self, ctx: click_core.Context) -> list[str]:
        """The commands in the order they were given."""
        return [*super().list_commands(ctx), *(name for name in self.lazy if name not in self.commands)]

    def get_command(self, ctx: click_core.Context, cmd_name: str) -> click_core.Command | None:
        """The command called `cmd_name`, built the first time it is asked for."""
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.commands[cmd_name] = _build(cmd_name, _resolve(self.lazy[cmd_name]))
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click_core.Context, args: list[str]
    ) -> tuple[str | None, click_core.Command | None, list[str]]:
        """The command `args` name, or a usage error that suggests the closest names (built or not)."""
        try:
            return super().resolve_command(ctx, args)
        except click_exceptions.UsageError as err:
            if args and "Did you mean" not in err.message:
                close = difflib.get_close_matches(args[0], self.list_commands(ctx))
                if close:
                    err.message = f"{err.message.rstrip('.')}. Did you mean {', '.join(map(repr, close))}?"
            raise

    def format_commands(self, ctx: click_core.Context, formatter: HelpFormatter) -> None:
        """The commands and their one-line help, as click writes them, from the docstrings alone."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(map(len, names))
        rows = [(name, click_utils.make_default_short_help(self._help_of(name), limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def _help_of(self, name: str) -> str:
        if name in self.commands:
            command = self.commands[name]
            return command.short_help or command.help or ""
        target = _resolve(self.lazy[name])
        if isinstance(target, typer.Typer):
            callback = target.registered_callback.callback if target.registered_callback else None
            return target.info.help or inspect.getdoc(callback) or ""
        return inspect.getdoc(target) or ""


def lazy_group(commands: dict[str, LazyTarget]) -> type[LazyGroup]:
    """A `LazyGroup` class of these commands (a sub-app, a command's function, or "module:attribute" naming one)."""
    return type("Commands", (LazyGroup,), {"lazy": commands})


def _resolve(target: LazyTarget) -> typer.Typer | Callable[..., Any]:
    if not isinstance(target, str):
        return target
    module, _, attribute = target.partition(":")
    found: typer.Typer | Callable[..., Any] = getattr(importlib.import_module(module), attribute)
    return found


def _build(name: str, target: typer.Typer | Callable[..., Any]) -> click_core.Command:
    import typer.main

    if not isinstance(target, typer.Typer):
        target_app = App(rich_markup_mode=None, add_completion=False)
        target_app.command(name)(target)
        target = target_app
    command = typer.main.get_command(target)
    command.name = name
    return command


class App(typer.Typer):
    """A typer app whose commands are `Command`s unless told otherwise."""

    def command(self, name: str | None = None, *, cls: Any = None, **settings: Any) -> Any:
        """Register a command, as `typer.Typer.command` does."""
        return super().command(name, cls=cls or Command, **settings)


def new_app(**settings: Any) -> typer.Typer:
    """A typer app under the contract: `-h`, plain help, no completion install options, no pretty tracebacks.

    Plain help: typer's rich help renderer imports more than typer itself does, on every `--help`.
    """
    settings.setdefault("no_args_is_help", True)
    settings.setdefault("add_completion", False)
    settings.setdefault("cls", Group)
    return App(
        context_settings=CONTEXT_SETTINGS,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
        **settings,
    )


def enable_debug() -> None:
    """Show tracebacks for this invocation (the `--debug` flag)."""
    global _debug
    _debug = True


def _redact_last_resort() -> None:
    """Put the redacting filter on `logging.lastResort`, where warnings go when no handler is configured.

    Now if `logging` is imported, else as soon as something imports it: importing it up front is 12 M instructions,
    4 % of what `vcpilot cluster status` costs (benchmarks/cli.py), and most commands log nothing.
    """
    logging = sys.modules.get("logging")
    if logging is None:
        if not any(isinstance(finder, _OnLoggingImport) for finder in sys.meta_path):
            sys.meta_path.insert(0, _OnLoggingImport())
    elif logging.lastResort is not None and not any(isinstance(f, RedactingFilter) for f in logging.lastResort.filters):
        logging.lastResort.addFilter(RedactingFilter())


class _OnLoggingImport:
    """A meta path finder that finds nothing itself: it runs `_redact_last_resort` once `logging` has loaded."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "logging":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)  # by the finders after this one, as the import would have been
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            load(module)
            _redact_last_resort()

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def invoke(
    command: click_core.Command,
    args: Sequence[str] | None,
    prog_name: str | None,
    *,
    complete_var: str | None = None,
    **extra: Any,
) -> int:
    """Run `command` on `args` (default: the process's) and return the exit code the contract gives its end."""
    global _debug
    # VCPILOT_DEBUG=false (or no, off) showed every error's traceback, as if it said yes
    _debug = os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")
    _redact_last_resort()
    argv = list(sys.argv[1:] if args is None else args)
    as_json = "--json" in (argv[: argv.index("--")] if "--" in argv else argv)
    name = prog_name or click_utils._detect_program_name()
    command._main_shell_completion(extra, name, complete_var)  # exits when the shell asks for completions
    try:
        with command.make_context(name, argv, **extra) as ctx:
            command.invoke(ctx)
        return 0
    except typer.Exit as done:
        return done.exit_code
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else 0 if done.code is None else EXIT_FAILED
    except click_exceptions.NoArgsIsHelpError as asked:  # `vcpilot cluster`: the group's help, as --help shows it
        typer.echo(asked.format_message())
        return EXIT_USAGE
    except click_exceptions.UsageError as err:
        return _fail(_usage_sentence(err), EXIT_USAGE, as_json)
    except VcpilotError as err:
        _traceback()
        return _fail(*explain(err), as_json)
    except typer.Abort:  # a confirmation answered no
        return _fail("aborted: nothing was changed (pass --yes not to be asked)", EXIT_FAILED, as_json)
    except EOFError:
        return _fail("standard input closed before a question was answered; pass --yes to not ask", 1, as_json)
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED, as_json)
    except OSError as err:
        if err.errno == errno.EPIPE:  # `vcpilot … | head`: the reader left; nothing more to say
            sys.stdout = click_utils.PacifyFlushWrapper(sys.stdout)  # type: ignore[assignment]
            return EXIT_FAILED
        _traceback()
        where = f"{err.filename}: " if err.filename else ""
        return _fail(f"{where}{err.strerror or err}", EXIT_FAILED, as_json)
    except Exception as err:
        _traceback()
        first = (str(err).strip().splitlines() or [""])[0]
        detail = f"{type(err).__name__}: {first}" if first else type(err).__name__
        hint = "" if _debug else f"; run again with --debug (or {DEBUG_ENV}=1) to see where"
        return _fail(f"internal error ({detail}), a bug in vcpilot{hint}", EXIT_FAILED, as_json)


def run(app: typer.Typer, argv: Sequence[str] | None, prog_name: str, *, default: str | None = None) -> int:
    """Run `app` on `argv` (default: the process's) and return its exit code instead of exiting.

    `default` names the command that runs when the first argument names none: the pod's spelling
    (`python -m components.logs --source …`) stays that of the step's command (`vcpilot logs step --source …`).
    """
    import typer.main

    args = list(sys.argv[1:] if argv is None else argv)
    command = typer.main.get_command(app)
    # An app of one command is that command (typer collapses it): then there is nothing to name.
    names = getattr(command, "commands", None)
    if default is not None and names and not (args and (args[0] in names or args[0] in ("--help", "-h"))):
        args.insert(0, default)
    return invoke(command, args, prog_name)


def reported(command: Callable[_P, _R]) -> Callable[_P, _R]:
    """The command as it is: kept for the commands that still carry it; `invoke` reports every error now."""
    return command


def interactive() -> bool:
    """True when a person can answer a question: standard input is a terminal."""
    return sys.stdin.isatty()


def confirm(question: str, without_terminal: str, kept: str) -> None:
    """Ask `question` (on stderr) before something is lost; a "no" says `kept` and exits 1.

    Without a terminal to ask at (a pipe, a script, CI) nothing is read: the command refuses with the sentence
    `without_terminal`, which names --yes, rather than take an answer nobody typed.
    """
    if not interactive():
        raise InputError(without_terminal)
    if not typer.confirm(question, default=False, err=True):
        typer.echo(kept, err=True)
        raise typer.Exit(EXIT_FAILED)


def print_json(data: Any) -> None:
    """Print `data` as the command's one JSON document on stdout."""
    print(json.dumps(data, indent=2))


def option_error(err: ValidationError, fields: Mapping[str, str] | None = None) -> InputError:
    """A pydantic error about a command's values as one sentence that names the option as it is typed.

    `fields` maps a model field to the command's parameter where their names differ (`train_max_steps` is the
    parameter `max_steps`, typed `--max-steps`); a field that is no option of the running command keeps its name.
    """
    first = err.errors(include_url=False)[0]
    loc = [str(part) for part in first.get("loc", ())]
    message = str(first["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    flag = flag_name(fields.get(loc[0], loc[0]) if fields else loc[0]) if loc else None
    if flag is None:
        return InputError(f"{'.'.join(loc)}: {message}" if loc else message)
    got = f", got {first['input']!r}" if "input" in first and not isinstance(first["input"], dict) else ""
    if message.startswith("Input should"):
        return InputError(f"{flag} should{message.removeprefix('Input should')}{got}")
    return InputError(f"{flag} is invalid ({message[:1].lower()}{message[1:]}{got})")


def flag_name(param: str) -> str | None:
    """`--max-steps` for the running command's parameter `max_steps`; None when it has no such option."""
    ctx = click_globals.get_current_context(silent=True)
    if ctx is None:
        return None
    for p in ctx.command.params:
        if p.name == param and p.param_type_name == "option":
            longs = [o for o in p.opts if o.startswith("--")]
            return (longs or p.opts)[0]
    return None


def given_options(*params: str) -> list[str]:
    """The options of the running command, among `params`, that the command line gave (`--lora-r`), in that order.

    For options that mean something only beside another: dropped without a word, they would look obeyed.
    """
    ctx = click_globals.get_current_context(silent=True)
    if ctx is None:
        return []
    return [
        flag_name(param) or param
        for param in params
        if ctx.get_parameter_source(param) is click_core.ParameterSource.COMMANDLINE
    ]


def _usage_sentence(err: click_exceptions.UsageError) -> str:
    """Click's message on one line, with where to read the command's options."""
    message = " ".join(err.format_message().split()).rstrip(".")
    message = re.sub(r"\. Did you mean (.*)\?$", r" (did you mean \1?)", message)
    bad = re.fullmatch(r"Invalid value for '([^']+)': (?:Value error, )?(.*)", message)
    if bad:  # typer's coercion speaks pydantic: "Input should be a valid integer"
        name, detail = bad.groups()
        param = getattr(err, "param", None)  # a BadParameter names its option
        low, high = getattr(param, "min", None), getattr(param, "max", None)
        if re.match(r"Input should be (greater|less) than", detail) and low is not None and high is not None:
            # both bounds: pydantic names only the one it tried last, which misleads for nan
            what = "a whole number" if isinstance(low, int) and isinstance(high, int) else "a number"
            message = f"{name} should be {what} from {_bound(low)} to {_bound(high)}"
        elif detail.startswith("Input should"):
            message = f"{name} should{detail.removeprefix('Input should')}"
        else:
            message = f"invalid {name} ({detail[:1].lower()}{detail[1:]})"
    message = message[:1].lower() + message[1:] if not message.startswith("-") else message
    if err.ctx is not None:
        message += f"; see `{err.ctx.command_path} --help`"
    return message


def _bound(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


# The most characters of an error sentence shown whole: far past any sentence of ours, short of a screenful.
SENTENCE_MAX = 1200


def _fail(sentence: str, code: int, as_json: bool) -> int:
    from components.untrusted import printable  # imported here: its patterns are compiled as it loads

    sentence = redact_text(sentence)  # an error may quote a URL or a header: never their credentials
    # one line, whatever it quotes: a name typed with a newline in it (`$'x\ny'`) shows as `x\ny`, and any other
    # control character (an escape sequence, a vertical tab, U+2028) as its escape, never acted on by the terminal
    sentence = sentence.replace("\r", "\\r").replace("\n", "\\n")
    sentence = printable(sentence, limit=len(sentence))
    if len(sentence) > SENTENCE_MAX:  # a value of 5,000 digits quoted whole: its start, and its end (what to do)
        sentence = f"{sentence[: SENTENCE_MAX * 2 // 3]} [...] {sentence[-SENTENCE_MAX // 3 :]}"
    if as_json:
        print(json.dumps({"error": sentence, "exit_code": code}), flush=True)
    print(f"error: {sentence}", file=sys.stderr, flush=True)
    return code


def _traceback() -> None:
    if _debug:
        traceback.print_exc(file=sys.stderr)
