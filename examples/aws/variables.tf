variable "name" {
  description = "Name of the Auto Scaling group; berth's provider_config name."
  type        = string
  default     = "berth-ci"
}

variable "vpc_id" {
  description = "VPC of the instances."
  type        = string
}

variable "subnet_ids" {
  description = "Subnets the group launches into (private subnets when berth runs in the VPC)."
  type        = list(string)
}

variable "ami_id" {
  description = "The CI image: sshd, a POSIX sh, git, and cloud-init printing the SSH host keys to the console (see README.md)."
  type        = string
}

variable "instance_types" {
  description = "Instance types; the first is the launch template's, all are allowed (more types give Spot more pools)."
  type        = list(string)
  default     = ["m7i.large"]
}

variable "on_demand_percentage" {
  description = "On-Demand share above base capacity, 0-100; below 100 the group launches Spot instances (then suspend must be false)."
  type        = number
  default     = 100
  validation {
    condition     = var.on_demand_percentage >= 0 && var.on_demand_percentage <= 100
    error_message = "on_demand_percentage must be between 0 and 100."
  }
}

variable "max_size" {
  description = "The group's MaxSize: at least berth's max_instances."
  type        = number
  default     = 10
}

variable "key_name" {
  description = "EC2 key pair whose private key berth logs in with (connector.key_path); null with use_instance_connect."
  type        = string
  default     = null
}

variable "ssh_port" {
  description = "Port of the instances' sshd (provider_config ssh_port)."
  type        = number
  default     = 22
}

variable "ssh_username" {
  description = "Login user of the image (connector.username): ec2-user, ubuntu, admin..."
  type        = string
  default     = "ec2-user"
}

variable "berth_cidr_blocks" {
  description = "Where berth connects from, for SSH to the instances."
  type        = list(string)
  default     = []
}

variable "berth_security_group_ids" {
  description = "Security groups of the berth host, for SSH to the instances."
  type        = list(string)
  default     = []
}

variable "suspend" {
  description = "Allow berth to suspend instances (Standby + stop): adds the permissions; needs an On-Demand group."
  type        = bool
  default     = false
}

variable "use_instance_connect" {
  description = "berth logs in with EC2 Instance Connect one-time keys instead of key_name."
  type        = bool
  default     = false
}

variable "root_device_name" {
  description = "Root device of the AMI (/dev/xvda on Amazon Linux, /dev/sda1 on Ubuntu and Debian)."
  type        = string
  default     = "/dev/xvda"
}

variable "root_volume_gb" {
  description = "Root volume size in GiB."
  type        = number
  default     = 50
}

variable "tags" {
  description = "Tags for the group and its instances."
  type        = map(string)
  default     = {}
}
