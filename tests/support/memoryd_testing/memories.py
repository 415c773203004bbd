"""The sample memories tests share, and what a memory is as opposed to how often it was read."""

from __future__ import annotations

from typing import Any

from memoryd_client import pb

# Sixty memories about different things: no two are near duplicates (the best match of
# each one's text is itself, the runner-up scores under 0.5), so tests can store any
# subset and expect every store to be CREATED.
FACTS = (
    "The user prefers dark mode in the code editor.",
    "Our production database runs PostgreSQL 16.",
    "The team meets every Monday at 10am for planning.",
    "Alice is the tech lead of the payments squad.",
    "The user is allergic to peanuts.",
    "Deployments happen through GitHub Actions on merge to main.",
    "The office wifi password rotates every quarter.",
    "Bob's birthday is on the 14th of March.",
    "The company was founded in Lisbon in 2015.",
    "We decided to drop support for Python 3.9.",
    "The user drinks green tea without sugar.",
    "Invoices are sent on the first business day of the month.",
    "The staging cluster lives in eu-west-1.",
    "Carol owns the mobile app release process.",
    "The user's cat is called Miso.",
    "Error budgets are reviewed in the monthly SRE sync.",
    "The marketing site is built with Astro.",
    "The user runs a half marathon every October.",
    "Our API rate limit is 600 requests per minute per key.",
    "The user speaks Portuguese and Japanese.",
    "Backups are kept for thirty days in cold storage.",
    "The design system uses the Inter typeface.",
    "Dave prefers code reviews over pair programming.",
    "The quarterly offsite will be held in Porto.",
    "Support tickets older than a week escalate automatically.",
    "The user's favourite film is Spirited Away.",
    "We chose Rust for the ingestion service.",
    "The data warehouse is Snowflake.",
    "Eve is on parental leave until September.",
    "The user commutes by bicycle.",
    "Feature flags are managed with LaunchDarkly.",
    "The user is learning to play the cello.",
    "Security patches must ship within 48 hours.",
    "The analytics dashboard refreshes every hour.",
    "Frank handles vendor contracts and procurement.",
    "The user keeps a vegetarian diet.",
    "The legacy billing system is written in COBOL.",
    "On-call rotations last one week each.",
    "The user lives in a flat near the river.",
    "Customer churn dropped by four percent last quarter.",
    "The search service uses Elasticsearch 8.",
    "Grace maintains the internal documentation wiki.",
    "The user dislikes phone calls and prefers chat.",
    "Our logo was redesigned last spring.",
    "The iOS app targets iOS 17 and newer.",
    "Henry is allergic to cats.",
    "The user plans to visit Kyoto next April.",
    "All secrets are stored in HashiCorp Vault.",
    "The user's laptop is a ThinkPad X1 Carbon.",
    "Weekly metrics are emailed on Friday afternoons.",
    "The load balancer terminates TLS 1.3 only.",
    "Ivy wrote the onboarding checklist for new hires.",
    "The user enjoys hiking in the Alps.",
    "We use Terraform to manage cloud infrastructure.",
    "The user's daughter starts school in autumn.",
    "Code freeze begins two weeks before each release.",
    "Jack is the point of contact for the Berlin office.",
    "The user collects vintage fountain pens.",
    "The recommendation model is retrained nightly.",
    "The user wakes up at six every morning.",
)

# What a memory *is*, as opposed to how often it was read (access tracking changes on
# every Recall): two reads of an unchanged memory agree on all of these.
CONTENT_FIELDS = (
    "id",
    "agent_id",
    "scope",
    "text",
    "summary",
    "category",
    "importance",
    "metadata",
    "created_at",
    "updated_at",
    "expires_at",
)


def memory_content(m: pb.Memory) -> dict[str, Any]:
    """The memory's ``CONTENT_FIELDS`` as plain values, for comparisons."""
    out: dict[str, Any] = {}
    for name in CONTENT_FIELDS:
        value = getattr(m, name)
        if name == "metadata":
            value = dict(value)
        elif name.endswith("_at"):
            value = value.ToJsonString() if m.HasField(name) else None  # type: ignore[arg-type]
        out[name] = value
    return out


def store_frames(agent_id: str, texts: list[str]) -> list[pb.StreamRequest]:
    """One Stream Store frame per text, for ``agent_id``, with request ids "0", "1", ..."""
    return [
        pb.StreamRequest(request_id=str(i), store=pb.StoreRequest(agent_id=agent_id, text=t))
        for i, t in enumerate(texts)
    ]
