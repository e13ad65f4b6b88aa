"""`python -m components.finetune …`: what a training pod runs (see `cli.py` for the flags and the env)."""

from components.finetune.cli import main

if __name__ == "__main__":
    main()
