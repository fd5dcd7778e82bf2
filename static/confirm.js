"use strict";
// Asks before an action that cannot be taken back. A form with data-confirm="question" (and
// data-confirm-detail, -button, -kind) opens a <dialog> instead of posting; its button posts
// the form with confirmed=1, which the server requires before it acts. Without this script the
// server asks the same question on a page of its own.
(() => {
  let dialog = null;
  const words = JSON.parse(document.body.dataset.words || "{}"); // the page's language

  function build() {
    const element = document.createElement("dialog");
    element.className = "confirm-dialog";
    element.setAttribute("aria-labelledby", "confirm-question");
    const title = element.appendChild(document.createElement("h2"));
    title.id = "confirm-question";
    element.appendChild(document.createElement("p"));
    const choices = element.appendChild(document.createElement("form"));
    choices.method = "dialog";
    choices.className = "actions";
    const yes = choices.appendChild(document.createElement("button"));
    yes.value = "yes";
    const no = choices.appendChild(document.createElement("button"));
    no.value = "no";
    no.className = "button secondary";
    no.textContent = words.back || "Back";
    document.body.appendChild(element);
    return element;
  }

  function ask(form) {
    dialog = dialog || build();
    const { confirm, confirmDetail, confirmButton, confirmKind } = form.dataset;
    dialog.querySelector("h2").textContent = confirm;
    dialog.querySelector("p").textContent = confirmDetail || "";
    const yes = dialog.querySelector("button[value=yes]");
    yes.textContent = confirmButton || words.confirm || "Confirm";
    yes.className = `button ${confirmKind || "danger"}`;
    dialog.returnValue = "";
    dialog.onclose = () => {
      if (dialog.returnValue !== "yes") return;
      const flag = document.createElement("input");
      flag.type = "hidden";
      flag.name = "confirmed";
      flag.value = "1";
      form.appendChild(flag);
      form.submit(); // no submit event: this handler does not ask again
    };
    dialog.showModal();
    dialog.querySelector("button[value=no]").focus();
  }

  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.dataset.confirm) return;
    event.preventDefault();
    ask(form);
  });
})();
