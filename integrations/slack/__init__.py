"""ASAP in Slack: mentions, DMs, thread follow-ups and ``/asap`` answered in threads, with Apply buttons.

- :mod:`integrations.slack.app`: the Bolt app (HTTP ``POST /slack/events`` and Socket Mode) and the
  runtime's route hook ``setup_routes(app, ctx)``.
- :mod:`integrations.slack.intake`: Slack requests -> Jobs (pure parsing).
- :mod:`integrations.slack.handlers`: worker handlers (ask, explain, apply) and the failure reply.
- :mod:`integrations.slack.blocks`: Block Kit rendering within Slack's limits.
- :mod:`integrations.slack.replies`: the one progress message per job, upserted.
- :mod:`integrations.slack.settings`: environment variables.
"""
