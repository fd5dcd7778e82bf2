"use strict";
// "Tick everyone shown" on the participants page. Without JavaScript the checkbox stays hidden
// and the "Add everyone shown" button does the same on the server.
document.querySelectorAll("[data-select-all]").forEach((toggle) => {
  const name = toggle.dataset.selectAll;
  const boxes = document.querySelectorAll(`input[type=checkbox][name="${name}"]`);
  toggle.closest("label").hidden = false;
  toggle.checked = boxes.length > 0 && [...boxes].every((box) => box.checked);
  toggle.addEventListener("change", () => {
    boxes.forEach((box) => { box.checked = toggle.checked; });
  });
});
