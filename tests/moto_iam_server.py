"""moto's server, checking CloudWatch Logs requests against the resource of each, as IAM does.

moto enforces identity policies (``INITIAL_NO_AUTH_ACTION_COUNT``) but hands CloudWatch Logs
requests to them with the resource ``*``, and leaves the policy variable ``${aws:username}`` as
written, so a statement limited to some streams never matches and a per-user statement matches
no user. AWS evaluates both (the service authorization reference: ``CreateLogStream``,
``PutLogEvents``, ``DeleteLogStream`` and ``GetLogEvents`` act on a ``log-stream``; the other
calls used here on a ``log-group``; IAM replaces ``${aws:username}`` with the caller's user
name). This process gives moto the same two things, and nothing else changes: run it as
``python -m tests.moto_iam_server -H 127.0.0.1 -p PORT`` in place of ``python -m moto.server``.
"""

from __future__ import annotations

import json
from typing import Any

STREAM_ACTIONS = {"CreateLogStream", "PutLogEvents", "DeleteLogStream", "GetLogEvents"}
VARIABLE = "${aws:username}"


def logs_resource(response: Any) -> str:
    """The ARN a CloudWatch Logs request acts on: its stream's, or its group's."""
    try:
        body = json.loads(response.body or "{}")
    except ValueError:
        return "*"
    group = body.get("logGroupName")
    if not group:
        return "*"
    arn = f"arn:aws:logs:{response.region}:{response.current_account}:log-group:{group}"
    action = response._get_action()
    if action in STREAM_ACTIONS and body.get("logStreamName"):
        return f"{arn}:log-stream:{body['logStreamName']}"
    return arn


def install() -> None:
    from moto.iam.access_control import IAMPolicy, IAMUserAccessKey
    from moto.logs.responses import LogsResponse

    LogsResponse._determine_resource = logs_resource  # type: ignore[attr-defined]
    collect = IAMUserAccessKey.collect_policies

    def with_user_name(self: Any) -> list[Any]:
        name = self._owner_user_name
        return [json.dumps(IAMPolicy(p)._policy_json).replace(VARIABLE, name) for p in collect(self)]

    IAMUserAccessKey.collect_policies = with_user_name  # type: ignore[method-assign]


if __name__ == "__main__":
    from moto.server import main

    install()
    main()
