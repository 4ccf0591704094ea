"""`prime env status` / `uninstall` name installed environments as the one reference grammar
reads them: NAME, OWNER/NAME[@VERSION] or a package name."""

from __future__ import annotations

import pytest

from hub_client.install import InstallError
from prime_cli.env.status import InstalledEnv, match_installed

WORDLE = InstalledEnv("Word_Le", "1.0", ["wordle-game"], "hub alice")


@pytest.mark.parametrize("name", ["word-le", "alice/word.le@1.0", "Bob/Word_Le", "wordle-game"])
def test_an_installed_environment_is_found_by_any_of_its_names(name: str) -> None:
    assert match_installed([name], [WORDLE]) == [WORDLE]


def test_a_name_that_is_not_a_reference_says_how_to_write_one() -> None:
    with pytest.raises(InstallError, match="write it as OWNER/NAME"):
        match_installed(["alice/word-le/extra"], [WORDLE])
    with pytest.raises(InstallError, match="is not installed here"):
        match_installed(["alice/other"], [WORDLE])
