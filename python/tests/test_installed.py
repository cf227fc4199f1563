"""The suite runs against an installed wheel, not the source tree."""

import os

import psikit


def test_imported_from_an_installed_package():
    if os.environ.get("PSIKIT_ALLOW_SOURCE_TREE"):
        return
    assert "site-packages" in psikit.__file__, psikit.__file__


def test_typing_files_are_shipped():
    here = os.path.dirname(psikit.__file__)
    assert os.path.exists(os.path.join(here, "py.typed"))
    assert os.path.exists(os.path.join(here, "_native.pyi"))


def test_exception_hierarchy():
    assert issubclass(psikit.InputError, psikit.PsikitError)
    assert issubclass(psikit.ProtocolError, psikit.PsikitError)
    assert issubclass(psikit.StaleFilterError, psikit.ProtocolError)
    assert issubclass(psikit.ParametersError, psikit.PsikitError)
    assert issubclass(psikit.PsikitError, Exception)
