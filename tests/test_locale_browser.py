"""Pauta in Brazilian Portuguese, in a real browser (Chromium, Playwright) that asks for pt-BR:
the main HR flow (a new cycle through its participants, reviews and activation, then the
reviewer writing a review) and the console overview with its chart. On every page: no English
word of Pauta's own left (the vocabulary of the English catalogue, minus the words Portuguese
shares, minus a short allowlist of names), dates written the Brazilian way, no English month,
and the chart's legend and axis in Portuguese.
"""

import re
from collections.abc import Iterator
from datetime import date, timedelta
from typing import Any

import pytest
from babel.messages.pofile import read_po
from playwright.sync_api import Browser, Page, expect

from devtools.catalogues import TRANSLATIONS
from hr.demo import DEPARTMENTS
from jobqueue import JobRequest, enqueue_many
from models.people import Role
from tests import test_console_browser as console
from tests.support.factories import make_employees, make_tenant, make_user, seeding, system_tenant
from tests.test_console_browser import watched_tab

browser = console.browser
server = console.server
pytestmark = console.pytestmark

WORD = re.compile(r"[A-Za-zÀ-ÿ]+")
# Words a Brazilian reader sees on these pages that are not Portuguese: the product's name,
# formats and units, and the names the tests give (queues, tasks, people, the organisation).
ALLOWED = {"Pauta", "CSV", "UTF", "E", "mail", "ok", "min", "ms", "s", "h", "d", "UTC", "N"}
MONTHS = re.compile(
    r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sept?|Oct|Nov|Dec|January|February|March|April|June"
    r"|July|August|September|October|November|December)\b"
)
BRAZILIAN_DATE = re.compile(r"\b\d{2}/\d{2}/\d{4}\b")


def words_of(language: str) -> set[str]:
    with (TRANSLATIONS / language / "LC_MESSAGES" / "messages.po").open("rb") as source:
        catalogue = read_po(source, locale=language)
    found: set[str] = set()
    for message in catalogue:
        if not message.id:
            continue
        texts = message.id if isinstance(message.id, tuple) else (message.id,)
        if language == "pt_BR":
            texts = message.string if isinstance(message.string, tuple) else (message.string,)
        for text in texts:
            plain = re.sub(r"<[^>]+>|%\(\w+\)[sd]|%[sd]", " ", text)
            found |= {word.lower() for word in WORD.findall(plain)}
    return found


ENGLISH_ONLY = words_of("en") - words_of("pt_BR")


def english_left(tab: Page, allowed: set[str]) -> list[str]:
    """The English words of Pauta's own on the page as the reader sees it (its visible text,
    and its title, placeholders, labels and tooltips)."""
    text = tab.evaluate(
        """() => [document.title, document.body.innerText,
            ...[...document.querySelectorAll('[title], [aria-label], [placeholder]')].flatMap(
                (e) => [e.title, e.getAttribute('aria-label'), e.placeholder])].join(' ')"""
    )
    return sorted(
        {
            word
            for word in WORD.findall(text)
            if word.lower() in ENGLISH_ONLY and word not in ALLOWED | allowed
        }
    )


def check_page(tab: Page, allowed: set[str], dates: bool = True) -> str:
    text = tab.locator("body").inner_text()
    assert english_left(tab, allowed) == [], tab.url
    assert not MONTHS.search(text), (tab.url, MONTHS.search(text))
    if dates:
        assert BRAZILIAN_DATE.search(text), tab.url
    return text


@pytest.fixture
def brazilian_tenant(app: Any) -> Iterator[tuple[Any, Any, list[Any]]]:
    with seeding(app) as session:
        tenant = make_tenant(session, "acme")
        people = make_employees(session, tenant, 6)
        admin = make_user(session, tenant, Role.HR_ADMIN, people[0])
        reviewer = make_user(session, tenant, Role.EMPLOYEE, people[1])
    yield admin, reviewer, people


def test_the_main_hr_flow_reads_brazilian_portuguese(
    browser: Browser, server: str, app: Any, brazilian_tenant: tuple[Any, Any, list[Any]]
) -> None:
    admin, reviewer, people = brazilian_tenant
    names = {word for person in people for word in WORD.findall(person.name)}
    names |= {"Acme", "Ltd", "Hr", "Admin", "Employee", "acme", *DEPARTMENTS, "Leadership"}
    start = date.today() + timedelta(days=1)
    with watched_tab(browser, server, admin, locale="pt-BR") as tab:
        tab.goto("/cycles/")
        expect(tab.locator("h1")).to_have_text("Ciclos de avaliação")
        check_page(tab, names, dates=False)
        tab.get_by_role("link", name="Novo ciclo", exact=True).click()
        check_page(tab, names, dates=False)
        tab.locator("#name").fill("Ciclo 2026")
        tab.locator("#period_start").fill(start.isoformat())
        tab.locator("#period_end").fill((start + timedelta(days=90)).isoformat())
        tab.locator("#due_date").fill((start + timedelta(days=100)).isoformat())
        tab.get_by_role("button", name="Criar rascunho").click()
        expect(tab.get_by_role("status")).to_contain_text("Rascunho “Ciclo 2026” criado")
        text = check_page(tab, names)
        assert f"Período {start:%d/%m/%Y} \u2013 " in text
        tab.get_by_role("button", name="Adicionar todos os exibidos").click()
        expect(tab.get_by_role("status")).to_contain_text("6 participantes adicionados")
        check_page(tab, names)
        tab.get_by_role("link", name="3. Avaliações").click()
        tab.get_by_role("button", name="Gerar avaliações").click()
        expect(tab.get_by_role("status")).to_contain_text("avaliações geradas")
        check_page(tab, names)
        tab.get_by_role("button", name="Ativar o ciclo").click()
        dialog = tab.locator("dialog.confirm-dialog")
        expect(dialog.locator("h2")).to_have_text("Ativar “Ciclo 2026”?")
        assert english_left(tab, names) == []
        dialog.get_by_role("button", name="Ativar o ciclo").click()
        expect(tab.get_by_role("status")).to_contain_text("“Ciclo 2026” está ativo")
        text = check_page(tab, names)
        assert re.search(r"ativado em \d{2}/\d{2}/\d{4} \d{2}:\d{2}", text)
        expect(tab.locator("td.delivery .badge").first).to_have_text("na fila")
    with watched_tab(browser, server, reviewer, locale="pt-BR") as tab:
        tab.goto("/my/reviews")
        text = check_page(tab, names, dates=False)  # the due date in words, below
        due = start + timedelta(days=100)
        assert "Prazo " in text and f"{due.day} de " in text and str(due.year) in text
        assert "Você (autoavaliação)" in text
        tab.get_by_role("link", name="Escrever avaliação").first.click()
        check_page(tab, names)
        tab.get_by_text("3 · Atende às expectativas").click()
        tab.locator("#comments").fill("Bom trabalho.")
        tab.get_by_role("button", name="Enviar avaliação").click()
        expect(tab.get_by_role("status")).to_contain_text("Obrigado: sua avaliação foi enviada.")
        check_page(tab, names)


def test_the_console_overview_and_its_chart_read_brazilian_portuguese(
    browser: Browser, server: str, app: Any, conn: Any
) -> None:
    enqueue_many(conn, [JobRequest("record_run", {"pause": 0}) for _ in range(1234)])
    with seeding(app) as session:
        admin = make_user(session, system_tenant(session), Role.PLATFORM_ADMIN)
    with watched_tab(browser, server, admin, locale="pt-BR") as tab:
        tab.goto("/queues/")
        expect(tab.locator("h1")).to_have_text("Filas")
        expect(console.figure(tab, "default", "available")).to_have_text("1.234")
        canvas = tab.locator("canvas[data-chart=throughput]")
        expect(canvas).to_have_attribute("data-drawn-at", console.DRAWN, timeout=10_000)
        legend = canvas.evaluate("c => Chart.getChart(c).data.datasets.map(d => d.label)")
        assert legend == ["concluídas", "repetidas", "mortas"]
        axis = canvas.evaluate("c => Chart.getChart(c).options.scales.y.title.text")
        assert axis == "tentativas por minuto"
        labels = canvas.evaluate("c => Chart.getChart(c).data.labels")
        assert labels and all(re.fullmatch(r"\d{2}:\d{2}", label) for label in labels)
        expect(tab.locator("[data-live-status]")).to_contain_text("atualizado", timeout=15_000)
        allowed = {"default", "Platform", "Admin", "System", "system"}
        check_page(tab, allowed, dates=False)
        console.screenshot(tab, "console-overview-pt-BR")
