"""Deterministic synthetic memories and queries for the benchmarks.

``memories(seed)`` yields short memories (preferences, facts, decisions, people) built
from templates with several independent slots. Names, months and weekdays barely move a
MiniLM embedding, so texts are de-duplicated on what is left once those are masked: among
the first 3,000 texts the closest pair scores 0.93, under the daemon's near-duplicate
threshold (0.95); the loaders still count DUPLICATE answers and report them.
``queries(seed)`` yields distinct questions about the same world. The same seed gives the
same sequence on every machine: only ``random.Random`` and the tables below are used.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator


def _words(text: str, sep: str | None = None) -> tuple[str, ...]:
    return tuple(text.split(sep))


FIRST = _words(
    "Alice Amara Ananya Ben Bilal Camila Carlos Chen Chloe Daniel Dara Diego Elena Emeka "
    "Erik Fatima Felix Freya Gabriel Grace Hana Hassan Ingrid Ivan Jamal Jia Joao Jonas "
    "Julia Kai Kenji Laila Lars Leila Lucas Mai Marco Maria Mateo Mei Mina Nadia Nikhil "
    "Noah Nora Olga Omar Oscar Paulo Priya Rafael Ravi Rosa Sakura Samir Sara Sofia Tariq "
    "Tomas Uma Valentina Wei Yara Yusuf Zainab Zoe Ahmed Beatriz Connor Dmitri Esther "
    "Farah Giulia Hugo Isabel Jorge Kofi Lena Malik Nina Pedro Quentin Rania Stefan Thea"
)
LAST = _words(
    "Abbott Adeyemi Alvarez Andersen Bauer Becker Costa Dubois Eriksen Fernandes Fischer "
    "Garcia Haddad Hansen Ibrahim Ito Jansen Kowalski Kim Larsen Lopez Moreau Mueller "
    "Nakamura Novak Okafor Oliveira Patel Petrov Quinn Rossi Santos Schmidt Silva Suzuki "
    "Tanaka Varga Wagner Walsh Yamamoto Zhang Nguyen Khan Murphy Lindqvist Horvat Mendes"
)
CITIES = _words(
    "Lisbon Porto Madrid Barcelona Berlin Munich Hamburg Paris Lyon Amsterdam Rotterdam "
    "Brussels Vienna Prague Warsaw Krakow Budapest Athens Rome Milan Naples Zurich Geneva "
    "Oslo Stockholm Copenhagen Helsinki Dublin Edinburgh London Manchester Toronto Montreal "
    "Vancouver Boston Chicago Denver Austin Seattle Portland Lagos Nairobi Cairo Istanbul "
    "Dubai Mumbai Bangalore Singapore Seoul Tokyo Osaka Sydney Melbourne Auckland Lima "
    "Bogota Santiago Mexico-City Sao-Paulo Montevideo"
)
TEAMS = _words(
    "payments billing search ranking growth onboarding mobile platform infrastructure "
    "security data-science analytics support marketing design legal finance recruiting "
    "checkout identity notifications messaging logistics pricing reporting compliance "
    "developer-experience observability storage networking machine-learning research"
)
SERVICES = _words(
    "ledger gateway scheduler indexer crawler notifier exporter importer tokenizer router "
    "resolver uploader renderer transcoder matcher forecaster reconciler auditor mailer "
    "profiler dispatcher aggregator deduplicator classifier"
)
TECH = _words(
    "PostgreSQL MySQL SQLite Redis Kafka RabbitMQ Elasticsearch ClickHouse Snowflake "
    "BigQuery DynamoDB Cassandra MongoDB Kubernetes Nomad Terraform Ansible Rust Go Python "
    "TypeScript Kotlin Elixir Scala Java Swift Haskell OCaml Zig gRPC GraphQL Airflow "
    "Dagster Spark Flink DuckDB LanceDB Prometheus Grafana Sentry"
)
DRINKS = _words(
    "green tea|black coffee|oat-milk flat white|sparkling water|chai latte|espresso|"
    "matcha|hot chocolate|rooibos|cold brew|mint tea|orange juice|kombucha|yerba mate|"
    "earl grey|iced americano|ginger lemonade|cortado|oolong|tomato juice|buttermilk|"
    "hibiscus tea|decaf cappuccino|coconut water|turkish coffee",
    "|",
)
FOODS = _words(
    "ramen|sushi|tacos|falafel|lasagne|pho|dumplings|paella|curry|pizza margherita|"
    "poke bowls|shakshuka|pad thai|bibimbap|pierogi|jollof rice|ceviche|moussaka|risotto|"
    "goulash|burritos|croissants|bao buns|tagine|fish and chips|gnocchi|laksa|empanadas|"
    "dal makhani|okonomiyaki|arepas|borscht|halloumi wraps|bacalhau|banh mi",
    "|",
)
HOBBIES = _words(
    "rock climbing|watercolour painting|chess|birdwatching|sourdough baking|trail running|"
    "playing the cello|woodworking|salsa dancing|astronomy|pottery|sailing|bouldering|"
    "learning Japanese|restoring old bicycles|growing tomatoes|photography|fencing|"
    "knitting|playing go|writing short stories|surfing|origami|beekeeping|kayaking|"
    "calligraphy|mountain biking|jazz piano|board games|cross-country skiing|judo|"
    "home brewing|bird photography|crossword puzzles|urban sketching|open-water swimming|"
    "vinyl collecting|tango|volunteering at the food bank|building drones",
    "|",
)
TOOLS = _words(
    "Neovim|VS Code|Emacs|IntelliJ|Zed|Helix|Sublime Text|Xcode|PyCharm|Vim with tmux|"
    "Jupyter notebooks|GoLand|Android Studio|Cursor|Kakoune",
    "|",
)
RELATIVES = _words("sister brother daughter son mother father cousin partner grandmother uncle")
JOBS = _words(
    "nurse|architect|teacher|pilot|chef|lawyer|veterinarian|carpenter|journalist|"
    "pharmacist|firefighter|translator|musician|civil engineer|dentist|librarian|"
    "electrician|midwife|geologist|baker|police officer|physiotherapist|accountant|"
    "marine biologist|taxi driver|social worker|radiologist|florist|tailor|surveyor",
    "|",
)
ROLES = _words(
    "tech lead|engineering manager|product manager|staff engineer|designer|data analyst|"
    "site reliability engineer|security officer|release manager|recruiter|CFO|CTO|"
    "customer success lead|QA lead|solutions architect|principal engineer|scrum master|"
    "technical writer|data engineer|head of operations|UX researcher|DevOps engineer|"
    "privacy officer|support engineer|sales engineer",
    "|",
)
TOPICS = _words(
    "the database migration|hiring plans|the on-call rotation|pricing experiments|"
    "the mobile redesign|GDPR requests|the quarterly roadmap|incident reviews|"
    "vendor contracts|the API deprecation|performance budgets|the security audit|"
    "the data retention policy|the office move|the partner integration|accessibility|"
    "the billing rewrite|SSO rollout|the holiday schedule|cost allocation|"
    "the design tokens|load testing|the search relevance tuning|the dark launch|"
    "the SOC 2 evidence|the cache invalidation bug|the onboarding survey|"
    "the public status page|the translation pipeline|the referral programme|"
    "the feature flag cleanup|the disaster recovery drill|the analytics schema|"
    "the interview loop|the customer advisory board|the edge caching plan|"
    "the ML model retraining|the support macros|the password policy|the release train",
    "|",
)
REASONS = _words(
    "it halves our cloud bill|the old one kept timing out|the auditors asked for it|"
    "customers complained about latency|it is easier to hire for|the licence expired|"
    "the team already knows it well|it removes a single point of failure|"
    "the vendor is discontinuing support|it simplifies the deploy pipeline|"
    "it passed the load test at twice peak traffic|legal needs a clear audit trail|"
    "the on-call load was burning people out|a big customer requires it|"
    "the migration tooling is mature|it cut build times by half|"
    "the security review flagged the old setup|it runs well on ARM machines|"
    "backups were unreliable before|the upgrade path was blocked|"
    "we need multi-region failover|it supports row-level permissions|"
    "the data volume tripled this year|it keeps the latency under 50 ms|"
    "the previous contract was too expensive",
    "|",
)
MONTHS = _words(
    "January February March April May June July August September October November December"
)
DAYS = _words("Monday Tuesday Wednesday Thursday Friday Saturday Sunday")
ADJ = _words(
    "amber silent rapid lunar crimson hidden golden brave quiet northern electric patient "
    "frozen wild gentle iron velvet hollow bright coastal"
)
NOUN = _words(
    "falcon harbor meadow compass lantern glacier orchard beacon canyon otter comet "
    "willow summit anchor prairie ember delta quarry heron atlas"
)


Gen = Callable[[random.Random], str]


def _person(r: random.Random) -> str:
    return f"{r.choice(FIRST)} {r.choice(LAST)}"


def _project(r: random.Random) -> str:
    return f"Project {r.choice(ADJ).capitalize()} {r.choice(NOUN).capitalize()}"


MEMORY_TEMPLATES: tuple[Gen, ...] = (
    # preferences
    lambda r: (
        f"{_person(r)} prefers {r.choice(DRINKS)} in the morning, {r.choice(DRINKS)} after "
        f"lunch, meetings in {r.choice(CITIES)} before noon, and small talk about "
        f"{r.choice(HOBBIES)}."
    ),
    lambda r: (
        f"{_person(r)} likes {r.choice(FOODS)} with {r.choice(DRINKS)} from the place near "
        f"the {r.choice(CITIES)} office and dislikes {r.choice(FOODS)}."
    ),
    lambda r: (
        f"{_person(r)} writes {r.choice(TECH)} in {r.choice(TOOLS)} and wants review comments "
        f"about {r.choice(TOPICS)} in writing before the {r.choice(TEAMS)} release."
    ),
    lambda r: (
        f"On weekends {_person(r)} spends time on {r.choice(HOBBIES)} in {r.choice(CITIES)} "
        f"with their {r.choice(RELATIVES)} and sometimes {r.choice(HOBBIES)}."
    ),
    lambda r: (
        f"The user wants updates on {r.choice(TOPICS)} and the {r.choice(SERVICES)} from "
        f"{_person(r)} as short bullet lists before the {r.choice(TEAMS)} stand-up in "
        f"{r.choice(CITIES)}."
    ),
    # facts
    lambda r: (
        f"The {r.choice(TEAMS)} {r.choice(SERVICES)} runs on {r.choice(TECH)} in "
        f"{r.choice(CITIES)}, and {_person(r)} is paged when it fails."
    ),
    lambda r: (
        f"{_person(r)}'s {r.choice(RELATIVES)} lives in {r.choice(CITIES)}, works as a "
        f"{r.choice(JOBS)} and loves {r.choice(FOODS)}."
    ),
    lambda r: (
        f"{_project(r)} ships in {r.choice(MONTHS)}, is run by {_person(r)} and depends on "
        f"{r.choice(TECH)} and {r.choice(TECH)}."
    ),
    lambda r: (
        f"The {r.choice(CITIES)} office is managed by {_person(r)}; its wifi belongs to the "
        f"{r.choice(TEAMS)} team, it has a {r.choice(HOBBIES)} club and a "
        f"{r.choice(FOODS)} place next door."
    ),
    lambda r: (
        f"Backups of the {r.choice(TEAMS)} {r.choice(SERVICES)} database go to "
        f"{r.choice(CITIES)}, are checked by {_person(r)} and stored with {r.choice(TECH)}."
    ),
    # decisions
    lambda r: (
        f"We decided to move the {r.choice(SERVICES)} from {r.choice(TECH)} to "
        f"{r.choice(TECH)} because {r.choice(REASONS)}; {_person(r)} leads it."
    ),
    lambda r: (
        f"The {r.choice(TEAMS)} team agreed with {_person(r)} to freeze deploys on "
        f"{r.choice(DAYS)}s until {_project(r)} ships, because {r.choice(REASONS)}."
    ),
    lambda r: (
        f"We chose {r.choice(TECH)} for {_project(r)} over {r.choice(TECH)}; "
        f"{_person(r)} signed off on it."
    ),
    lambda r: (
        f"It was decided that {r.choice(TOPICS)} is owned by {_person(r)} of the "
        f"{r.choice(TEAMS)} team until {r.choice(MONTHS)}, with a review in {r.choice(CITIES)}."
    ),
    # people
    lambda r: (
        f"{_person(r)} is the {r.choice(ROLES)} of the {r.choice(TEAMS)} team, knows most "
        f"about {r.choice(TOPICS)} and loves {r.choice(HOBBIES)}."
    ),
    lambda r: (
        f"{_person(r)} moved from {r.choice(CITIES)} to {r.choice(CITIES)}, works as a "
        f"{r.choice(JOBS)} and now enjoys {r.choice(HOBBIES)}."
    ),
    lambda r: (
        f"{_person(r)} and {_person(r)} of the {r.choice(TEAMS)} team co-wrote the proposal "
        f"on {r.choice(TOPICS)} in {r.choice(CITIES)}; ask them before touching the "
        f"{r.choice(SERVICES)}."
    ),
    lambda r: (
        f"{_person(r)} is allergic to {r.choice(FOODS)}, so lunches in {r.choice(CITIES)} "
        f"with the {r.choice(TEAMS)} team serve {r.choice(FOODS)} instead."
    ),
)

QUERY_TEMPLATES: tuple[Gen, ...] = (
    lambda r: f"What does {_person(r)} like to drink?",
    lambda r: f"Which food should we avoid at the {r.choice(CITIES)} team lunch?",
    lambda r: f"Which editor does {_person(r)} use?",
    lambda r: f"What does {_person(r)} do on weekends?",
    lambda r: f"Where does the {r.choice(TEAMS)} {r.choice(SERVICES)} run?",
    lambda r: f"Where does {_person(r)}'s {r.choice(RELATIVES)} live?",
    lambda r: f"When does {_project(r)} ship?",
    lambda r: f"How many desks does the {r.choice(CITIES)} office have?",
    lambda r: f"Why did we move the {r.choice(SERVICES)} off {r.choice(TECH)}?",
    lambda r: f"When are deploys frozen for the {r.choice(TEAMS)} team?",
    lambda r: f"Who signed off on using {r.choice(TECH)} for {_project(r)}?",
    lambda r: f"Who owns {r.choice(TOPICS)}?",
    lambda r: f"Who is the {r.choice(ROLES)} of the {r.choice(TEAMS)} team?",
    lambda r: f"Who knows about {r.choice(TOPICS)} and {r.choice(HOBBIES)}?",
    lambda r: f"How long are {r.choice(SERVICES)} backups kept?",
    lambda r: f"How does the user want status updates in {r.choice(MONTHS)}?",
)


# Names, months and weekdays barely move a MiniLM embedding: two texts that differ only
# there score 0.97-0.99. Texts are de-duplicated on what is left once they are masked.
_WEAK = re.compile(r"\b(?:" + "|".join(FIRST + LAST + MONTHS + DAYS) + r")\b")


def _signature(text: str) -> str:
    return _WEAK.sub("_", text)


def _distinct(
    templates: tuple[Gen, ...], seed: int, key: Callable[[str], str] = str
) -> Iterator[str]:
    r = random.Random(seed)
    seen: set[str] = set()
    while True:
        text = r.choice(templates)(r)
        seen_key = key(text)
        if seen_key not in seen:
            seen.add(seen_key)
            yield text


def memories(seed: int = 0) -> Iterator[str]:
    """An endless stream of distinct memory texts (same seed, same stream)."""
    return _distinct(MEMORY_TEMPLATES, seed, _signature)


def queries(seed: int = 0) -> Iterator[str]:
    """An endless stream of distinct questions (same seed, same stream).

    Distinct as strings, which is what the daemon's query-embedding cache keys on.
    """
    return _distinct(QUERY_TEMPLATES, seed + 1_000_003)


def take(stream: Iterator[str], n: int) -> list[str]:
    return [next(stream) for _ in range(n)]
