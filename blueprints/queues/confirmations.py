"""What the console asks before the actions that cannot be taken back; the page's button and
the view that acts use the same question (see blueprints.confirmation)."""

from flask_babel import gettext as _

from blueprints.confirmation import Confirmation


def pause_queue(name: str) -> Confirmation:
    return Confirmation(
        _("Pause queue %(name)s?", name=name),
        _(
            "Workers stop claiming its jobs until someone resumes it; jobs already claimed still "
            "run."
        ),
        _("Pause queue"),
    )


def discard_job(job_id: int) -> Confirmation:
    return Confirmation(
        _("Discard job #%(id)s?", id=job_id),
        _(
            "It is marked cancelled: it leaves the failures list and the dead count, keeps its "
            "error and attempts, and is pruned with the other cancelled jobs. Until then it can "
            "be requeued."
        ),
        _("Discard job"),
    )


def drain_worker(name: str) -> Confirmation:
    return Confirmation(
        _("Shut down %(name)s?", name=name),
        _(
            "It stops claiming, finishes its running jobs within its grace period, gives back the "
            "rest and exits, with its queue children. Its queues are served only by other workers "
            "until it is started again."
        ),
        _("Shut down"),
    )


def drain_all() -> Confirmation:
    return Confirmation(
        _("Shut down every worker?"),
        _(
            "Each stops claiming, finishes its running jobs within its grace period and exits. No "
            "job runs until a worker is started again."
        ),
        _("Shut down all"),
    )
