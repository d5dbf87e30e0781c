"""Access: who may do what, and the record of what was done.

    access: roles, the users table and the permission check of every action.
    guard: the guard of the action path (role, namespace, MFA, read-only, audit).
    mfa: TOTP codes for destructive admin actions.
    audit: the append-only, hash-chained audit log.
    audit_sink: the copies of every record the login cannot rewrite (CloudWatch Logs, syslog).
    audit_syslog: the system log as one of those copies.
    audit_remote: the CloudWatch copy read back: verify against it, the shared log for auditors.
    audit_shared: the shared copy checked chain by chain (forks, breaks, gaps, identity mismatches).
    audit_relay: the root-owned relay every login's records reach on a shared machine.
    key_hygiene: alerts on old access keys, expiring credentials and unencrypted launches.
    rbac: what the cluster lets this login do to jobs (SelfSubjectAccessReview, kept a minute).
    aws_roles: [aws.roles]: every AWS call through the STS role session of the login's role.
    iam_policy: the IAM roles and policies gpuconsole acts through (JSON, Terraform).
    whoami: who the console acts as, section by section.
    key_rotation: renewing an IAM user's access key in the shared credentials file.
"""
