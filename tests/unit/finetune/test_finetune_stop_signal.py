"""SIGTERM while training is a flag, not an end: the process lives on to checkpoint, and a second one is harmless."""

from __future__ import annotations

import os
import signal

from components.finetune.stop_signal import StopSignal


def test_sigterm_sets_the_flag_instead_of_ending_the_process_and_the_old_handler_comes_back():
    before = signal.getsignal(signal.SIGTERM)
    stop = StopSignal()
    with stop.listen():
        assert not stop.received
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # the kubelet, or a person, insisting
        assert stop.received
    assert signal.getsignal(signal.SIGTERM) is before
