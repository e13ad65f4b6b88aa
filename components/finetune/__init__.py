"""finetune: train the model under Volcano's distributed environment, checkpointing as it goes."""
