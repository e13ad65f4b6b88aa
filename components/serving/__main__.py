"""`python -m components.serving --model DIR --port N`: what the load-test VCJob's `server` task runs."""

from components.serving.cli import app

__all__: list[str] = []

if __name__ == "__main__":
    app(prog_name="python -m components.serving")
