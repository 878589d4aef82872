package gate_test

import (
	"context"
	"fmt"
	"log"

	"github.com/portcullis/portcullis"
	"github.com/portcullis/portcullis/gate"
	"github.com/portcullis/portcullis/memstore"
	"github.com/portcullis/portcullis/policy"
)

const examplePolicy = `
version: 1
tools:
  list_elements:  {endpoint: READ}
  create_element: {endpoint: CREATE}
  delete_element: {endpoint: DELETE, canBeElevated: false,
                   rationale: "Destructive operation, permanently removes data"}
elements:
  - name: Security Persona
    type: persona
    gatekeeper: {deny: [delete_*]}
`

func ExampleNew() {
	pol, _, err := policy.Parse("policy.yaml", []byte(examplePolicy))
	if err != nil {
		log.Fatal(err)
	}
	g, err := gate.New(pol, gate.WithStore(memstore.New(nil)))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(g.Policy().Tools), "tools")
	// Output: 3 tools
}

func ExampleGate_Decide() {
	pol, _, err := policy.Parse("policy.yaml", []byte(examplePolicy))
	if err != nil {
		log.Fatal(err)
	}
	g, err := gate.New(pol)
	if err != nil {
		log.Fatal(err)
	}
	for _, tool := range []string{"list_elements", "create_element", "delete_element"} {
		d, err := g.Decide(context.Background(), portcullis.Call{Tool: tool, Session: "s1"})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s %s code=%q\n", tool, d.Outcome, d.PermissionLevel, d.Code)
	}
	// Output:
	// list_elements: allow AUTO_APPROVE code=""
	// create_element: confirm CONFIRM_SESSION code="CONFIRMATION_REQUIRED"
	// delete_element: deny DENY code="ELEMENT_POLICY_VIOLATION"
}
