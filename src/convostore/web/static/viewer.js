// convostore viewer: older pages on demand, compaction originals on expand, live messages.
// Served as a file (the pages' Content-Security-Policy allows no inline script). Every HTML
// fragment inserted here was rendered, escaped, by the server.
"use strict";

(function () {
  function fetchJSON(url) {
    return fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) { throw new Error(response.status + " " + response.statusText); }
        return response.json();
      });
  }

  function notice(text) {
    var box = document.getElementById("notice");
    if (box) { box.textContent = text; box.hidden = false; }
  }

  // --- older messages ---------------------------------------------------------------------
  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-older]");
    if (!button) { return; }
    var list = document.getElementById("messages");
    button.disabled = true;
    button.textContent = "Loading…";
    fetchJSON(button.dataset.older).then(function (page) {
      var before = document.documentElement.scrollHeight;
      list.insertAdjacentHTML("afterbegin", page.html);
      window.scrollBy(0, document.documentElement.scrollHeight - before);
      if (page.older) {
        button.dataset.older = page.older;
        button.disabled = false;
        button.textContent = "Load older messages";
      } else {
        var start = document.createElement("p");
        start.className = "start";
        start.textContent = "Start of the conversation";
        button.replaceWith(start);
      }
    }).catch(function (error) {
      button.disabled = false;
      button.textContent = "Load older messages (failed: " + error.message + ")";
    });
  });

  // --- what a compaction summary stands for -----------------------------------------------
  function loadOriginals(details, url, body) {
    fetchJSON(url).then(function (page) {
      var loading = body.querySelector(".loading, .more-originals");
      if (loading) { loading.remove(); }
      body.insertAdjacentHTML("beforeend", page.html);
      if (page.more) {
        var more = document.createElement("button");
        more.type = "button";
        more.className = "more-originals";
        more.textContent = "Show more";
        more.addEventListener("click", function () {
          more.disabled = true;
          loadOriginals(details, page.more, body);
        });
        body.appendChild(more);
      }
    }).catch(function (error) {
      body.textContent = "Could not load the original messages: " + error.message;
    });
  }

  document.addEventListener("toggle", function (event) {
    var details = event.target;
    if (!details.matches || !details.matches("details[data-src]") || !details.open) { return; }
    if (details.dataset.loaded) { return; }
    details.dataset.loaded = "1";
    loadOriginals(details, details.dataset.src, details.querySelector(".originals-body"));
  }, true);

  // --- live: messages other processes write -----------------------------------------------
  function nearBottom() {
    var doc = document.documentElement;
    return doc.scrollHeight - (window.scrollY + window.innerHeight) < 200;
  }

  function live(list) {
    var status = document.getElementById("live-status");
    var source = new EventSource(list.dataset.events);
    source.addEventListener("open", function () {
      if (status) { status.textContent = "live"; status.className = "live on"; }
    });
    source.addEventListener("error", function () {
      if (status) { status.textContent = "reconnecting…"; status.className = "live off"; }
    });
    source.addEventListener("messages", function (event) {
      var follow = nearBottom();
      var batch = JSON.parse(event.data);
      list.insertAdjacentHTML("beforeend", batch.html);
      list.dataset.last = batch.last;
      if (follow) { window.scrollTo(0, document.documentElement.scrollHeight); }
    });
    source.addEventListener("reset", function (event) {
      source.close();
      if (status) { status.textContent = "paused"; status.className = "live off"; }
      var reason = "";
      try { reason = JSON.parse(event.data).reason || ""; } catch (error) { reason = ""; }
      notice("This conversation changed" + (reason ? " (" + reason + ")" : "") +
             ". Reload the page to see it.");
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var list = document.getElementById("messages");
    if (!list) { return; }
    if (!window.location.hash) { window.scrollTo(0, document.documentElement.scrollHeight); }
    if (list.dataset.events) { live(list); }
  });
})();
