package awsfake

import (
	"encoding/json"
	"net/http"
	"time"

	"golang.org/x/crypto/ssh"
)

// eicKeyLifetime is how long a key pushed by SendSSHPublicKey lets its
// holder log in; AWS documents 60 seconds.
const eicKeyLifetime = 60 * time.Second

// serveEIC serves EC2 Instance Connect's JSON 1.1 API: one operation,
// SendSSHPublicKey.
func (c *Cloud) serveEIC(w http.ResponseWriter, r *http.Request, op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.gate(r, "ec2-instance-connect", op); err != nil {
		writeJSONError(w, err)
		return
	}
	if op != "SendSSHPublicKey" {
		writeJSONError(w, &apiError{http.StatusBadRequest, "UnknownOperationException", "unknown operation " + op})
		return
	}
	var in struct {
		InstanceID     string `json:"InstanceId"`
		InstanceOSUser string
		SSHPublicKey   string
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeJSONError(w, &apiError{http.StatusBadRequest, "SerializationException", err.Error()})
		return
	}
	c.advanceLocked()
	inst, ok := c.instances[in.InstanceID]
	if !ok || c.now().Before(inst.visibleAt) {
		writeJSONError(w, &apiError{http.StatusBadRequest, "EC2InstanceNotFoundException", "Instance not found: " + in.InstanceID})
		return
	}
	if inst.State != EC2Running {
		writeJSONError(w, &apiError{http.StatusBadRequest, "EC2InstanceStateInvalidException", "Instance " + in.InstanceID + " is not in a valid state (" + inst.State + ")"})
		return
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(in.SSHPublicKey))
	if err != nil || (key.Type() != ssh.KeyAlgoRSA && key.Type() != ssh.KeyAlgoED25519) {
		writeJSONError(w, &apiError{http.StatusBadRequest, "InvalidArgsException", "The SSH public key must be RSA or ED25519 in OpenSSH format"})
		return
	}
	c.eicKeys[in.InstanceID] = append(c.eicKeys[in.InstanceID], eicKey{in.InstanceOSUser, key, c.now().Add(eicKeyLifetime)})
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	json.NewEncoder(w).Encode(map[string]any{"RequestId": requestID(), "Success": true})
}
