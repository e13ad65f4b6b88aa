"""The root of vcpilot's errors: one a person must act on, with one sentence that says what to fix.

Every area's errors derive from `VcpilotError` (the tree is drawn in docs/architecture.md); every boundary — the
`vcpilot` command, a pod's entry point, an MCP tool, a workflow step — turns one into a message and an exit code
with `explain`, so the same fault reads and exits the same everywhere.
"""

from __future__ import annotations

__all__ = [
    "EXIT_FAILED",
    "EXIT_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "InputError",
    "Unavailable",
    "VcpilotError",
    "explain",
]

# A person's error and a failed run share 1: both mean "read the message"; only what a script does differs, and it
# gets 2 (the command line itself is wrong) and 3 (try again later) apart. Pods exit with the same codes; the
# pipeline's diagnose step reads only whether every rank exited alike (agent/failures.py), never a code's meaning.
EXIT_OK = 0
EXIT_FAILED = 1  # the work ran and did not succeed
EXIT_INPUT = 1  # the input is wrong (a file, an option's value, a name): fix what the message says, then run again
EXIT_USAGE = 2  # the command line is wrong: an unknown option, a value of the wrong type, a missing argument
EXIT_UNAVAILABLE = 3  # a service it needs could not be reached: the same command may work later
EXIT_INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, as a shell reports it


class VcpilotError(Exception):
    """An error a person must act on; `str(err)` is one sentence that says what to fix."""

    exit_code = EXIT_INPUT

    def __str__(self) -> str:
        # One line whatever the sentence quotes: a kind, a name or a value read from a file with a newline in it
        # reads `\n`, in a command's error, a step's termination message and an MCP tool's refusal alike.
        return super().__str__().replace("\r", "\\r").replace("\n", "\\n")


class Unavailable(VcpilotError):
    """A service this needs (the cluster's API, the tracking server, a model server) could not be reached."""

    exit_code = EXIT_UNAVAILABLE


# A ValueError too: the checks that raise it run inside pydantic validators and parsers whose callers catch
# ValueError for a bad value.
class InputError(VcpilotError, ValueError):
    """A bad option, parameter or file that no area's error names (a missing report, a file where a directory goes)."""


def explain(err: VcpilotError) -> tuple[str, int]:
    """The one sentence to show for `err` and the exit code to end with.

    Each boundary frames the sentence its own way: a command prints `error: <sentence>`, a workflow step
    `<step>: <sentence>`, an MCP tool returns it as the refusal.
    """
    sentence = str(err).strip() or f"{type(err).__name__} (no message)"
    return sentence, err.exit_code
