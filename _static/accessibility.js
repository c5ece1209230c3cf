// Accessible names that contain what a reader sees (WCAG 2.5.3, "label in name"), on every page of the book (Jupyter
// Book adds each .js of _static to every page). Three controls of the theme and of myst-nb carry an aria-label other
// than their visible text, which the browser tests' axe-core audit reports as serious:
// - myst-nb's folds (<summary aria-label="Toggle hidden content">Show code cell source</summary>): the visible
//   "Show ..." text is the better name, so the label goes;
// - the theme's search button ("Search", shown as "Search Ctrl+K"): its visible text names it;
// - the theme's colour-mode button, which shows "Light", "Dark" or "System" as the icon's title: its name says all three.
// And the references page's list of citations (sphinxcontrib-bibtex: role="list") gets its items (role="listitem"
// for the deprecated "doc-biblioentry"), which axe-core reports as critical when missing.
(function () {
  "use strict";
  function name() {
    document.querySelectorAll('summary[aria-label="Toggle hidden content"]').forEach((summary) => {
      if (summary.textContent.trim()) summary.removeAttribute("aria-label");
    });
    document.querySelectorAll(".search-button-field[aria-label]").forEach((button) => {
      if (button.textContent.trim()) button.removeAttribute("aria-label");
    });
    document.querySelectorAll(".theme-switch-button").forEach((button) => {
      button.setAttribute("aria-label", "Color mode: light, dark or system");
    });
    document.querySelectorAll('[role="list"] > .citation').forEach((item) => {  // doc-biblioentry is deprecated
      item.setAttribute("role", "listitem");
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", name);
  else name();
})();
