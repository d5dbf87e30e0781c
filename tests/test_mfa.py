"""TOTP MFA on a fixed clock: right codes pass once, wrong and replayed codes fail and count,
five failures in five minutes lock the user out for five minutes."""

from __future__ import annotations

import stat

import pyotp
import pytest

from gpuconsole.core.access.mfa import LOCKOUT_S, MfaError, MfaStore, code_at, qr_text


class Clock:
    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def store(tmp_path):
    clock = Clock()
    mfa = MfaStore(tmp_path / "data" / "mfa.json", clock)
    secret, uri = mfa.enroll("ada")
    return mfa, clock, secret, uri


def test_enrolment_gives_an_otpauth_uri_and_a_private_secret_file(store, tmp_path) -> None:
    mfa, _clock, secret, uri = store
    assert uri.startswith("otpauth://totp/gpuconsole:ada?") and f"secret={secret}" in uri
    assert pyotp.parse_uri(uri).secret == secret
    assert stat.S_IMODE(mfa.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(mfa.path.parent.stat().st_mode) == 0o700
    assert mfa.enrolled("ada") and not mfa.enrolled("bob")
    assert "█" in qr_text(uri) or "▀" in qr_text(uri)


def test_the_right_code_passes_and_opens_a_window(store) -> None:
    mfa, clock, secret, _ = store
    assert not mfa.fresh("ada", 120)
    mfa.verify("ada", code_at(secret, clock()))
    assert mfa.fresh("ada", 120)
    clock.t += 121
    assert not mfa.fresh("ada", 120)


def test_a_code_of_the_previous_step_is_accepted_for_clock_drift(store) -> None:
    mfa, clock, secret, _ = store
    mfa.verify("ada", code_at(secret, clock() - 30))


def test_a_wrong_code_fails_and_is_counted(store) -> None:
    mfa, clock, secret, _ = store
    right = code_at(secret, clock())
    wrong = "000000" if right != "000000" else "111111"
    with pytest.raises(MfaError, match=r"^wrong code \(1 of 5 allowed failures\)$"):
        mfa.verify("ada", wrong)
    with pytest.raises(MfaError, match=r"wrong code \(2 of 5"):
        mfa.verify("ada", "not-a-code")
    assert not mfa.fresh("ada", 120)


def test_a_replayed_code_fails(store) -> None:
    mfa, clock, secret, _ = store
    code = code_at(secret, clock())
    mfa.verify("ada", code)
    clock.t += 5
    with pytest.raises(MfaError, match="code already used"):
        mfa.verify("ada", code)
    # An older step's code is a replay too, once a newer one was accepted.
    clock.t += 30
    mfa.verify("ada", code_at(secret, clock()))
    with pytest.raises(MfaError, match="code already used"):
        mfa.verify("ada", code)


def test_five_failures_in_five_minutes_lock_the_user_out_for_five_minutes(store) -> None:
    mfa, clock, secret, _ = store
    for n in range(1, 5):
        with pytest.raises(MfaError, match=f"{n} of 5"):
            mfa.verify("ada", "000000" if code_at(secret, clock()) != "000000" else "111111")
        clock.t += 10
    with pytest.raises(MfaError, match="locked out for 5 min"):
        mfa.verify("ada", "999999x")
    clock.t += 60
    with pytest.raises(MfaError, match=r"^locked out after 5 wrong codes: try again in 240 s$"):
        mfa.verify("ada", code_at(secret, clock()))  # even the right code
    assert mfa.locked_for("ada") == pytest.approx(240)
    clock.t += LOCKOUT_S
    mfa.verify("ada", code_at(secret, clock()))
    assert mfa.fresh("ada", 120)


def test_failures_spread_over_more_than_five_minutes_do_not_lock(store) -> None:
    mfa, clock, secret, _ = store
    for _ in range(8):
        with pytest.raises(MfaError, match="wrong code"):
            mfa.verify("ada", "abc")
        clock.t += 80
    mfa.verify("ada", code_at(secret, clock()))


def test_state_survives_a_new_store_on_the_same_file(store) -> None:
    mfa, clock, secret, _ = store
    code = code_at(secret, clock())
    mfa.verify("ada", code)
    again = MfaStore(mfa.path, clock)
    with pytest.raises(MfaError, match="already used"):
        again.verify("ada", code)


def test_a_user_without_a_secret_is_told_how_to_enrol(store) -> None:
    mfa, _clock, _secret, _ = store
    with pytest.raises(MfaError, match="bob has no MFA enrolled: run gpuconsole users mfa enroll"):
        mfa.verify("bob", "123456")
