"""Who of the waiting quick calls works next (playground.runtime.workers.Admission), without worker processes: one
call per address at work, addresses in turn, a bound on what one address may have waiting, and the spare worker kept
for addresses whose calls have been short."""

from __future__ import annotations

import threading
import time

import pytest

from playground.runtime.workers import LONG_CALL_S, MAX_LINE, Admission, WorkStopped

FLOODER, VICTIM, OTHER = "203.0.113.7", "198.51.100.1", "198.51.100.2"


def done(admission: Admission, turn, seconds: float = 0.1) -> None:
    """The call holding `turn` ends after `seconds` of work."""
    with admission.changed:
        admission.leave(turn, seconds)


def test_an_address_that_flooded_waits_behind_a_newcomer_and_its_extra_calls_are_refused_at_once():
    admission = Admission(size=1, reserve=0, waiting=3)
    flood = [admission.enter(FLOODER) for _ in range(4)]  # one at work, three waiting: the most it may have
    with pytest.raises(WorkStopped, match="Your network has 4 requests at this server's workers already"):
        admission.enter(FLOODER)
    victim = admission.enter(VICTIM)
    assert [turn.granted for turn in (*flood, victim)] == [True, False, False, False, False]

    done(admission, flood[0])  # the flooder's next call waits from now: behind the victim, who came earlier
    assert victim.granted and not flood[1].granted
    done(admission, victim)
    assert flood[1].granted  # then the flooder's, one at a time, in the order they came
    assert not flood[2].granted and not flood[3].granted


def test_addresses_take_turns_and_one_address_has_one_call_at_work():
    admission = Admission(size=2, reserve=0, waiting=4)
    first, second = admission.enter(FLOODER), admission.enter(FLOODER)
    assert first.granted and not second.granted  # a worker is free, but the address has its one at work
    other = admission.enter(OTHER)
    assert other.granted
    done(admission, first)
    assert second.granted


def test_the_spare_worker_serves_a_short_caller_while_long_calls_hold_the_others():
    admission = Admission(size=2, reserve=1, waiting=4)
    attackers = ["203.0.113.1", "203.0.113.2", "203.0.113.3"]
    long_calls = [admission.enter(address) for address in attackers[:2]]
    for turn in long_calls:  # each attacker's first call ran long: they leave the spare to others for a while
        done(admission, turn, LONG_CALL_S + 1)
    held = [admission.enter(address) for address in attackers[:2]]
    assert all(turn.granted for turn in held)  # the two workers
    again = admission.enter(attackers[0])
    assert not again.granted
    victim = admission.enter(VICTIM)
    assert victim.granted  # the spare: its address has made no long call
    newcomer = admission.enter(attackers[2])
    assert not newcomer.granted  # no more than the two workers and the spare at once
    done(admission, victim)
    assert newcomer.granted  # its calls have been short too: the spare is its
    done(admission, newcomer, LONG_CALL_S + 1)
    assert not again.granted  # the spare is not for an address whose calls ran long


def test_nobodys_calls_share_the_workers_in_the_order_they_came():
    admission = Admission(size=2, reserve=1, waiting=0)
    calls = [admission.enter("") for _ in range(4)]
    assert [turn.granted for turn in calls] == [True, True, False, False]  # the spare is for named addresses
    done(admission, calls[1])
    assert calls[2].granted and not calls[3].granted


def test_a_waiting_call_ends_when_its_client_has_gone_and_gives_its_place_back():
    admission = Admission(size=1, reserve=0, waiting=4)
    holder = admission.enter(OTHER)
    left = time.monotonic() + 0.3
    with pytest.raises(WorkStopped, match="The page that asked for this has closed"):
        with admission.turn(VICTIM, gone=lambda: time.monotonic() > left):
            pass
    assert not admission.line
    started = threading.Event()

    def next_call() -> None:
        with admission.turn(VICTIM, gone=None):
            started.set()

    waiter = threading.Thread(target=next_call)
    waiter.start()
    done(admission, holder)
    assert started.wait(5)
    waiter.join()
    assert not admission.at_work and not admission.line



def test_all_addresses_together_wait_in_a_bounded_line():
    """Each waiting call holds one of Gradio's job threads: many networks' calls never take them all."""
    admission = Admission(size=1, reserve=0, waiting=4)
    at_work = admission.enter("192.0.2.200")
    line = [admission.enter(f"192.0.2.{n}") for n in range(MAX_LINE)]
    with pytest.raises(WorkStopped, match="Every worker of this server is busy"):
        admission.enter("192.0.2.250")
    assert at_work.granted and not any(turn.granted for turn in line)
    done(admission, at_work)  # room again once the line moves
    assert line[0].granted and not admission.enter("192.0.2.250").granted
