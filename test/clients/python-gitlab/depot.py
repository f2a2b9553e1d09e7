"""Shared by the python-gitlab flows: the client for the Depot under test, and the report."""

import json
import os
import sys
import warnings

import gitlab

# python-gitlab warns (UserWarning) when an answer surprises it, e.g. a Link header that leaves
# the server's URL: a surprise fails the flow.
warnings.simplefilter("error", UserWarning)


def connect(token=None):
    """A client for the server the test started, with the token it gave (or `token`)."""
    return gitlab.Gitlab(
        os.environ["DEPOT_URL"], private_token=token or os.environ["DEPOT_TOKEN"]
    )


def report(results):
    """The flow's observations, one JSON line on stdout, for the test to assert on."""
    json.dump(results, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")


def error_of(call):
    """The class and HTTP code of the python-gitlab error `call` raises (None if none)."""
    try:
        call()
    except gitlab.exceptions.GitlabError as error:
        return [type(error).__name__, error.response_code]
    return None
