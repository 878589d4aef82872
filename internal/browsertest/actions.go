package browsertest

import (
	"encoding/json"
	"time"

	"github.com/chromedp/chromedp"
)

// wait is how long Click and Type wait for their element.
const wait = 30 * time.Second

// find is a script that returns the element sel once it is in the page,
// shown and enabled, or null.
func find(sel string) string {
	q, err := json.Marshal(sel)
	if err != nil {
		panic(err) // a string always marshals
	}
	return `(() => { const e = document.querySelector(` + string(q) + `);
		return e && e.isConnected && e.getClientRects().length > 0 && !e.disabled ? e : null })()`
}

// Click clicks the element sel once it is shown and enabled.
//
// It finds the element and clicks it in one evaluation. The console's live
// refresh may replace the page's main region at any moment; chromedp.Click
// finds a node in one call and clicks it in later ones, and a refresh in
// between leaves it holding a detached node ("Could not find node with
// given id"). A click by script runs the same activation as a person's:
// a submit button validates and submits its form.
func Click(sel string) chromedp.Action {
	var done bool
	return chromedp.Poll(`(() => { const e = `+find(sel)+`;
		if (!e) { return false; }
		e.scrollIntoView({block: "center"});
		e.click();
		return true })()`, &done, chromedp.WithPollingTimeout(wait))
}

// Type focuses the field sel, once it is shown and enabled, in one
// evaluation, and types text into it as key presses. A focused field
// holds the console's live refresh back, so the keys reach the field that
// was found.
func Type(sel, text string) chromedp.Action {
	var done bool
	return chromedp.Tasks{
		chromedp.Poll(`(() => { const e = `+find(sel)+`;
			if (!e) { return false; }
			e.focus();
			return document.activeElement === e })()`, &done, chromedp.WithPollingTimeout(wait)),
		chromedp.KeyEvent(text),
	}
}
