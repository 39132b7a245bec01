"""kasir.kit.ids: ids from the OS's CSPRNG; sortable ids sort by the time they were made."""

from __future__ import annotations

import string
import time
from collections import Counter

from kasir.kit.ids import new_id, new_sortable_id, random_token

ALPHABET = set(string.ascii_uppercase + string.digits)


def test_random_tokens_use_the_whole_alphabet_evenly():
    drawn = Counter("".join(random_token(20) for _ in range(5000)))
    assert set(drawn) == ALPHABET
    expected = 5000 * 20 / 36
    assert all(0.9 * expected < count < 1.1 * expected for count in drawn.values())
    digits = Counter(random_token(12, "0123456789")[0] for _ in range(5000))
    assert set(digits) == set("0123456789")


def test_ids_have_their_prefix_and_length():
    for make in (new_id, new_sortable_id):
        made = make("CARD", 20)
        assert made.startswith("CARD")
        assert len(made) == 24
        assert set(made[4:]) <= ALPHABET


def test_sortable_ids_made_later_sort_after_and_stay_unguessable():
    earlier = [new_sortable_id("CARD", 20) for _ in range(100)]
    time.sleep(0.002)  # wall-clock time: the stamp is its millisecond, and this one is a later one
    later = new_sortable_id("CARD", 20)
    assert all(made < later for made in earlier)
    assert len(set(earlier)) == 100  # the random part differs within one millisecond
    before = time.time_ns() // 1_000_000
    stamped = int(new_sortable_id("CARD", 20)[4:13], 36)  # the stamp is the time, in ms, base 36
    assert before <= stamped <= time.time_ns() // 1_000_000


def test_random_tokens_need_an_alphabet_of_distinct_ascii_characters():
    for alphabet in ("", "A", "AAB", "ÄB"):
        try:
            random_token(5, alphabet)
        except ValueError:
            continue
        raise AssertionError(f"{alphabet!r} was taken")
    assert random_token(0) == ""
    assert len(random_token(1000, "01")) == 1000
