package eureka

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"mime"
	"strings"

	"github.com/hudl/fargo"
)

// ErrMalformed is a request body that is not an instance in Eureka's JSON
// or XML.
var ErrMalformed = errors.New("eureka: malformed instance")

// ParseRegistration reads the body of a registration (POST /apps/{APP}) as
// a client sends it, JSON ({"instance": {…}}) or XML (<instance>…</instance>)
// by its Content-Type, into the layer's Instance: what a gateway checks
// before it passes the body on unchanged. An error wraps ErrMalformed and
// says what is wrong.
func ParseRegistration(body []byte, contentType string) (Instance, error) {
	media, _, _ := mime.ParseMediaType(contentType)
	xmlBody := strings.HasSuffix(media, "/xml") || strings.HasSuffix(media, "+xml")
	if media == "" {
		// No Content-Type: Eureka's Jersey reads the body by its first
		// character, as the tests of Spring's and Netflix's clients send.
		xmlBody = strings.HasPrefix(strings.TrimSpace(string(body)), "<")
	}
	var fi fargo.Instance
	if xmlBody {
		if err := xml.Unmarshal(body, &fi); err != nil {
			return Instance{}, fmt.Errorf("%w: XML: %v", ErrMalformed, err)
		}
	} else {
		var wrapper struct {
			Instance *json.RawMessage `json:"instance"`
		}
		if err := json.Unmarshal(body, &wrapper); err != nil {
			return Instance{}, fmt.Errorf("%w: JSON: %v", ErrMalformed, err)
		}
		if wrapper.Instance == nil {
			return Instance{}, fmt.Errorf(`%w: JSON: want {"instance": {…}}`, ErrMalformed)
		}
		if err := json.Unmarshal(*wrapper.Instance, &fi); err != nil {
			return Instance{}, fmt.Errorf("%w: JSON: %v", ErrMalformed, err)
		}
	}
	inst, err := fromFargo(&fi)
	if err != nil {
		return Instance{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return inst, nil
}
